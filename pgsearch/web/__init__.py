"""`pgsearch serve`: an HTTP API for hosts in any language, and a page for people.

`pgsearch.web.app` is the ASGI application (Starlette, served by uvicorn), on one
`AsyncPgSearch`; `inputs` checks what requests carry; `openapi` describes it;
`limits` holds the per-token request rates; ``static/`` is the page (plain HTML,
CSS and JavaScript, no build step). The web packages are an optional extra
(``pip install 'pgsearch[http]'``), imported only when a server starts.
"""
