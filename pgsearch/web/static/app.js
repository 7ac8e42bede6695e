// The pgsearch page: search, filters, results, a session view; no build step.
// Every string from the server is put in the page as text (textContent), never as
// HTML. The URL holds the query and the open session, so any view can be linked;
// the token stays in the browser's storage and never enters a URL.
"use strict";

const TOKEN_KEY = "pgsearch.token";
const PAGE = 16;
const RESULTS = 20;
const FILTERS = ["kind", "role", "tool", "session", "since", "until", "all"];

const $ = (id) => document.getElementById(id);
// `searches` counts the searches started: only the newest one's answer is shown, so a
// slow answer to an earlier search never replaces a later one's.
const state = { token: null, who: null, cursor: null, matches: [], selected: -1, view: null, searches: 0 };

function loadToken() {
  return sessionStorage.getItem(TOKEN_KEY) || localStorage.getItem(TOKEN_KEY);
}

function saveToken(token, remember) {
  sessionStorage.setItem(TOKEN_KEY, token);
  if (remember) localStorage.setItem(TOKEN_KEY, token);
}

function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  localStorage.removeItem(TOKEN_KEY);
  state.token = null;
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(path, body) {
  const headers = { Accept: "application/json" };
  if (state.token) headers.Authorization = "Bearer " + state.token;
  const init = { headers };
  if (body !== undefined) {
    init.method = "POST";
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  let data = null;
  try {
    data = await response.json();
  } catch (_) {
    data = null;
  }
  if (!response.ok) {
    const err = (data && data.error) || { code: "internal", message: response.statusText };
    throw new ApiError(response.status, err.code, err.message);
  }
  return data;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

// An excerpt's pieces: [text, matched] from its highlights, [start, end] offsets in
// code points (a JavaScript string counts UTF-16 units, so it is split into code
// points first). Ranges out of order or outside the text are ignored.
function pieces(m) {
  const chars = Array.from(m.excerpt || "");
  const out = [];
  let pos = 0;
  for (const [start, end] of m.highlights || []) {
    if (start < pos || end <= start || end > chars.length) continue;
    if (start > pos) out.push([chars.slice(pos, start).join(""), false]);
    out.push([chars.slice(start, end).join(""), true]);
    pos = end;
  }
  if (pos < chars.length) out.push([chars.slice(pos).join(""), false]);
  return out;
}

function highlighted(m) {
  const out = document.createDocumentFragment();
  for (const [piece, matched] of pieces(m)) {
    out.append(matched ? el("mark", { text: piece }) : document.createTextNode(piece));
  }
  return out;
}

function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

function status(text) {
  $("status").textContent = text;
}

// The words the excerpts marked (typo and stem matches included), to mark them in a
// session's messages too; longest first so that a longer word wins an overlap.
function markedWords(matches) {
  const words = new Set();
  for (const m of matches) {
    for (const [piece, matched] of pieces(m)) {
      if (matched && piece.trim()) words.add(piece.trim().toLowerCase());
    }
  }
  return [...words].sort((a, b) => b.length - a.length);
}

function marked(text, words) {
  if (!words.length) return document.createTextNode(text);
  const escaped = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const pattern = new RegExp("(" + escaped.join("|") + ")", "giu");
  const out = document.createDocumentFragment();
  text.split(pattern).forEach((piece, i) => {
    if (!piece) return;
    out.append(i % 2 ? el("mark", { text: piece }) : document.createTextNode(piece));
  });
  return out;
}

// --- the URL ---------------------------------------------------------------------

function params() {
  return new URLSearchParams(location.search);
}

function searchParamsFromForm() {
  const p = new URLSearchParams();
  p.set("q", $("q").value);
  const fields = {
    kind: $("f-kind").value, role: $("f-role").value, tool: $("f-tool").value.trim(),
    session: $("f-session").value.trim(), since: $("f-since").value, until: $("f-until").value,
  };
  for (const [k, v] of Object.entries(fields)) if (v) p.set(k, v);
  if ($("f-all").checked) p.set("all", "1");
  return p;
}

function fillForm(p) {
  $("q").value = p.get("q") || "";
  $("f-kind").value = p.get("kind") || "";
  $("f-role").value = p.get("role") || "";
  $("f-tool").value = p.get("tool") || "";
  $("f-session").value = p.get("session") || "";
  $("f-since").value = p.get("since") || "";
  $("f-until").value = p.get("until") || "";
  $("f-all").checked = p.get("all") === "1";
  if (FILTERS.some((k) => p.get(k))) $("filters").open = true;
}

function go(p, replace) {
  const url = location.pathname + (p.toString() ? "?" + p.toString() : "");
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  route();
}

// The search request the URL describes (field names as the API's).
function requestFrom(p) {
  const body = { query: p.get("q") || "", limit: RESULTS, per_session: p.get("all") !== "1" };
  if (p.get("kind")) body.kinds = [p.get("kind")];
  if (p.get("role")) body.roles = [p.get("role")];
  if (p.get("tool")) body.tool_name = p.get("tool");
  if (p.get("session")) body.session_id = p.get("session");
  if (p.get("since")) body.since = p.get("since") + "T00:00:00Z";
  if (p.get("until")) {
    const end = new Date(p.get("until") + "T00:00:00Z");
    end.setUTCDate(end.getUTCDate() + 1);
    body.until = end.toISOString();
  }
  return body;
}

// --- search ------------------------------------------------------------------------

async function runSearch(p, more) {
  const body = requestFrom(p);
  if (more && state.cursor) body.cursor = state.cursor;
  const search = ++state.searches;
  $("results").setAttribute("aria-busy", "true");
  status(more ? "Loading more…" : "Searching…");
  let result;
  let error = null;
  try {
    result = await api("/v1/search", body);
  } catch (err) {
    error = err;
  }
  if (search !== state.searches) return;
  $("results").setAttribute("aria-busy", "false");
  if (error) return failed(error);
  if (!more) {
    state.matches = [];
    $("results").replaceChildren();
    state.selected = -1;
  }
  // An empty query lists the newest entries: not a search, so no scores or chart.
  state.browsing = !(body.query || "").trim();
  state.cursor = result.next_cursor;
  const start = state.matches.length;
  state.matches.push(...result.matches);
  result.matches.forEach((m, i) => $("results").append(resultItem(m, start + i)));
  $("more").hidden = !result.next_cursor;
  const n = state.matches.length;
  const searched = `${result.searched} ${result.searched === 1 ? "entry" : "entries"} searched`;
  const more_ = result.next_cursor ? " so far" : "";
  let text;
  if (state.browsing) {
    text = n ? `Newest entries (${n}${more_}) · ${searched}` : `No entries · ${searched}`;
  } else {
    text = n ? `${n} match${n === 1 ? "" : "es"}${more_} · ${searched}` : `No match · ${searched}`;
  }
  if (result.notice) text += " · " + result.notice;
  status(text);
  if (state.browsing) $("histogram").hidden = true;
  else histogram(state.matches);
  if (!more && n) select(0, false);
}

function resultItem(m, index) {
  const item = el(
    "li",
    { class: "result", tabindex: "-1", "data-index": index, "data-session": m.session_id, "data-seq": m.seq },
    el(
      "header",
      null,
      el("span", { class: "title", text: m.title || m.session_id }),
      el("span", { class: "tag", text: m.kind }),
      el("span", { text: m.role + (m.tool_name ? " · " + m.tool_name : "") }),
      el("time", { datetime: m.created_at, text: when(m.created_at) }),
      state.browsing ? null : el("span", { class: "score", title: "score", text: "score " + m.score.toFixed(3) }),
    ),
    el("p", { class: "excerpt" }, highlighted(m)),
  );
  item.addEventListener("click", () => openMatch(index));
  return item;
}

function select(index, focus) {
  const items = $("results").children;
  if (!items.length) return;
  index = Math.max(0, Math.min(items.length - 1, index));
  if (state.selected >= 0 && items[state.selected]) items[state.selected].classList.remove("selected");
  state.selected = index;
  items[index].classList.add("selected");
  if (focus) {
    items[index].focus({ preventScroll: true });
    items[index].scrollIntoView({ block: "nearest" });
  }
}

function openMatch(index) {
  const m = state.matches[index];
  if (!m) return;
  const p = params();
  p.set("sid", m.session_id);
  p.set("seq", String(m.seq));
  p.delete("start");
  go(p);
}

// Hits over time: the matches shown, in up to 24 bins between the first and last.
function histogram(matches) {
  const fig = $("histogram");
  const times = matches.map((m) => Date.parse(m.created_at)).filter((t) => !Number.isNaN(t));
  if (times.length < 2) {
    fig.hidden = true;
    return;
  }
  const lo = Math.min(...times);
  const hi = Math.max(...times);
  const bins = new Array(24).fill(0);
  for (const t of times) {
    const i = hi === lo ? 0 : Math.min(bins.length - 1, Math.floor(((t - lo) / (hi - lo)) * bins.length));
    bins[i] += 1;
  }
  const top = Math.max(...bins);
  const svg = $("histogram-svg");
  svg.setAttribute("viewBox", `0 0 ${bins.length * 10} 40`);
  svg.replaceChildren();
  bins.forEach((count, i) => {
    if (!count) return;
    const h = Math.max(2, (count / top) * 38);
    const rect = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    rect.setAttribute("class", "bar");
    rect.setAttribute("x", String(i * 10 + 1));
    rect.setAttribute("y", String(40 - h));
    rect.setAttribute("width", "8");
    rect.setAttribute("height", String(h));
    const title = document.createElementNS("http://www.w3.org/2000/svg", "title");
    title.textContent = `${count} hit${count === 1 ? "" : "s"}`;
    rect.append(title);
    svg.append(rect);
  });
  $("h-first").textContent = when(new Date(lo).toISOString());
  $("h-last").textContent = when(new Date(hi).toISOString());
  fig.hidden = false;
}

// --- a session -----------------------------------------------------------------------

async function openSession(p) {
  const sid = p.get("sid");
  const seq = p.get("seq");
  const start = p.get("start");
  const path = "/v1/sessions/" + encodeURIComponent(sid);
  const view = { sid, first: null, last: null, next: null, count: null };
  state.view = view;
  state.words = markedWords(state.matches);
  $("messages").replaceChildren();
  $("session-title").textContent = sid;
  $("session-meta").textContent = "";
  try {
    const info = await api(path);
    if (state.view !== view) return;
    state.view.count = info.message_count;
    $("session-title").textContent = info.title || sid;
    $("session-meta").textContent = [
      sid, `${info.message_count} messages`, info.source, when(info.updated_at),
    ].filter(Boolean).join(" · ");
    let page;
    if (start !== null) {
      page = await api(`${path}/messages?start_seq=${Number(start)}&limit=${PAGE}`);
    } else {
      page = await api(`${path}/around?seq=${Number(seq || 0)}&before=5&after=10`);
    }
    if (state.view !== view) return;
    showPage(page);
  } catch (err) {
    if (state.view === view) failed(err);
  }
  if (state.view === view) timeline(p, sid);
}

// Tool calls as people read them (as `pgsearch.calls` does for text output): a stored
// line `name({...JSON...})` shown as `name(key=value, ...)`, a string value holding
// newlines on lines of its own; any other line as it is. Text only, never HTML.
function readableCall(line) {
  const match = /^([^\s(){}]+)\((\{.*\})\)$/.exec(line);
  if (!match) return line;
  let args;
  try {
    args = JSON.parse(match[2]);
  } catch {
    return line;
  }
  if (!args || typeof args !== "object" || Array.isArray(args)) return line;
  const parts = Object.entries(args).map(([key, value]) => {
    if (typeof value === "string" && value.includes("\n")) {
      const body = value.split("\n").map((l) => "    " + l).join("\n");
      return `${key}="""\n${body}\n    """`;
    }
    return `${key}=${JSON.stringify(value)}`;
  });
  return `${match[1]}(${parts.join(", ")})`;
}

function readableCalls(text) {
  return text.split("\n").map(readableCall).join("\n");
}

// --- Markdown, safely ----------------------------------------------------------------
// A small renderer for the Markdown people and models write in messages: headings,
// emphasis, inline code, fenced code, lists, quotes, links (http and https only).
// It builds DOM nodes and puts every piece of stored text in the page as text, so raw
// HTML stays text and a link to anything but http(s) stays text. Each text piece goes
// through `marked`, so the session view marks the matched words inside it too.

// Lines of a tool's output (or a code block) shown before the rest is folded.
const FOLD = 12;

function markedText(text) {
  return marked(text, state.words || []);
}

// A link target the page may follow: an absolute http(s) URL, else null.
function safeHref(url) {
  try {
    const u = new URL(url);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
  } catch {
    return null;
  }
}

const INLINE = new RegExp(
  [
    "(`+)([^`]|[^`][\\s\\S]*?[^`])\\1(?!`)", // 1,2: code span
    "\\[([^\\[\\]\\n]+)\\]\\(([^()\\s]+)\\)", // 3,4: link
    "\\*\\*(?=\\S)([\\s\\S]*?\\S)\\*\\*", // 5: strong
    "__(?=\\S)([\\s\\S]*?\\S)__(?!\\w)", // 6: strong
    "\\*(?=[^\\s*])([^*\\n]*?[^\\s*])\\*", // 7: emphasis
    "(?<![\\w])_(?=[^\\s_])([^_\\n]*?[^\\s_])_(?!\\w)", // 8: emphasis
    "(?<![\\w(\\[<])(https?://[^\\s<>()\\[\\]]*[^\\s<>()\\[\\].,;:!?'\"])", // 9: bare URL
  ].join("|"),
  "u",
);

function inline(text) {
  const out = document.createDocumentFragment();
  let rest = text;
  while (rest) {
    const m = INLINE.exec(rest);
    if (!m) break;
    if (m.index > 0) out.append(markedText(rest.slice(0, m.index)));
    if (m[2] !== undefined) out.append(el("code", null, markedText(m[2])));
    else if (m[3] !== undefined) {
      const href = safeHref(m[4]);
      if (href) out.append(el("a", { href, rel: "noopener noreferrer nofollow", target: "_blank" }, inline(m[3])));
      else out.append(markedText(m[0]));
    } else if (m[5] !== undefined || m[6] !== undefined) out.append(el("strong", null, inline(m[5] ?? m[6])));
    else if (m[7] !== undefined || m[8] !== undefined) out.append(el("em", null, inline(m[7] ?? m[8])));
    else if (m[9] !== undefined) {
      const href = safeHref(m[9]);
      out.append(href ? el("a", { href, rel: "noopener noreferrer nofollow", target: "_blank" }, markedText(m[9])) : markedText(m[9]));
    }
    rest = rest.slice(m.index + m[0].length);
  }
  if (rest) out.append(markedText(rest));
  return out;
}

// Text shown as it is (code, tool input and output): the first FOLD lines, the rest
// behind a fold that opens by itself when a matched word is in it.
function folded(text, codeClass) {
  const lines = text.split("\n");
  const code = (t) => el("pre", null, el("code", { class: codeClass }, markedText(t)));
  if (lines.length <= FOLD + 3) return code(text);
  const box = el("div", { class: "fold" }, code(lines.slice(0, FOLD).join("\n")));
  const more = el(
    "details",
    null,
    el("summary", { text: `${lines.length - FOLD} more lines` }),
    code(lines.slice(FOLD).join("\n")),
  );
  if (more.querySelector("mark")) more.open = true;
  box.append(more);
  return box;
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;

function markdown(text) {
  const out = document.createDocumentFragment();
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i++;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      const close = new RegExp("^ {0,3}" + fence[1][0] + "{" + fence[1].length + ",}\\s*$");
      const body = [];
      i++;
      while (i < lines.length && !close.test(lines[i])) body.push(lines[i++]);
      i++;
      out.append(folded(body.join("\n"), fence[2] ? "language-" + fence[2] : null));
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      out.append(el("h" + Math.min(heading[1].length + 2, 6), { class: "md-h" }, inline(heading[2])));
      i++;
      continue;
    }
    if (RULE.test(line)) {
      out.append(el("hr"));
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && QUOTE.test(lines[i])) body.push(QUOTE.exec(lines[i++])[1]);
      out.append(el("blockquote", null, markdown(body.join("\n"))));
      continue;
    }
    const item = ITEM.exec(line);
    if (item) {
      const ordered = /\d/.test(item[2]);
      const list = el(ordered ? "ol" : "ul");
      if (ordered && parseInt(item[2], 10) !== 1) list.setAttribute("start", String(parseInt(item[2], 10)));
      while (i < lines.length) {
        const it = ITEM.exec(lines[i]);
        if (!it || /\d/.test(it[2]) !== ordered) break;
        const body = [it[3]];
        i++;
        // Lines indented under an item (and not items themselves) continue it.
        while (i < lines.length && /^\s+\S/.test(lines[i]) && !ITEM.exec(lines[i])) body.push(lines[i++].trim());
        const li = el("li", { class: it[1].length >= 2 ? "nested" : null }, inline(body.join("\n")));
        list.append(li);
      }
      out.append(list);
      continue;
    }
    const para = [];
    while (
      i < lines.length &&
      lines[i].trim() &&
      !FENCE.test(lines[i]) &&
      !HEADING.test(lines[i]) &&
      !QUOTE.test(lines[i]) &&
      !(para.length && ITEM.test(lines[i]) && !/^\s{4,}/.test(lines[i]))
    ) {
      para.push(lines[i++]);
    }
    out.append(el("p", null, inline(para.join("\n"))));
  }
  return out;
}

// Kinds whose text people and models write as Markdown.
const PROSE = new Set(["user_text", "assistant_text", "summary", "goal"]);

function messageBody(m) {
  if (PROSE.has(m.kind)) return el("div", { class: "md" }, markdown(m.content));
  return folded(m.kind === "tool_input" ? readableCalls(m.content) : m.content, null);
}

function showPage(page) {
  const list = $("messages");
  list.replaceChildren();
  for (const m of page.messages) {
    list.append(
      el(
        "li",
        { class: "message" + (m.anchor ? " anchor" : ""), "data-seq": m.seq, id: "m" + m.seq },
        el(
          "header",
          null,
          el("span", { class: "role", text: m.role }),
          el("span", { class: "tag", text: m.kind }),
          m.tool_name ? el("span", { text: m.tool_name }) : null,
          el("span", { text: "#" + m.seq }),
          el("time", { datetime: m.created_at, text: when(m.created_at) }),
        ),
        messageBody(m),
      ),
    );
  }
  const v = state.view;
  v.first = page.messages.length ? page.messages[0].seq : null;
  v.last = page.messages.length ? page.messages[page.messages.length - 1].seq : null;
  const total = v.count === null ? "" : ` of ${v.count}`;
  $("page-label").textContent = v.first === null ? "No messages" : `Messages ${v.first}–${v.last}${total}`;
  $("prev-page").disabled = !v.first;
  $("next-page").disabled = v.last === null || (v.count !== null && v.last + 1 >= v.count);
  const anchor = list.querySelector(".anchor");
  if (anchor) anchor.scrollIntoView({ block: "center" });
  else window.scrollTo(0, 0);
}

function page(direction) {
  const v = state.view;
  if (!v || v.first === null) return;
  const start = direction < 0 ? Math.max(0, v.first - PAGE) : v.last + 1;
  if (direction < 0 && v.first === 0) return;
  if (direction > 0 && $("next-page").disabled) return;
  const p = params();
  p.set("start", String(start));
  p.delete("seq");
  go(p, true);
}

// Where this query's hits fall in the session (by position), each one a link.
async function timeline(p, sid) {
  const fig = $("timeline");
  if (!(p.get("q") || "").trim()) {
    fig.hidden = true;
    return;
  }
  const body = requestFrom(p);
  body.session_id = sid;
  body.per_session = false;
  body.limit = 50;
  let result;
  try {
    result = await api("/v1/search", body);
  } catch (_) {
    return;
  }
  const count = state.view && state.view.count;
  if (!result.matches.length || !count) {
    fig.hidden = true;
    return;
  }
  const svg = $("timeline-svg");
  svg.setAttribute("viewBox", "0 0 1000 20");
  svg.replaceChildren();
  const ns = "http://www.w3.org/2000/svg";
  const track = document.createElementNS(ns, "rect");
  track.setAttribute("class", "track");
  track.setAttribute("x", "0");
  track.setAttribute("y", "9");
  track.setAttribute("width", "1000");
  track.setAttribute("height", "2");
  svg.append(track);
  const here = Number(p.get("seq"));
  for (const m of result.matches) {
    const rect = document.createElementNS(ns, "rect");
    rect.setAttribute("class", m.seq === here ? "hit here" : "hit");
    rect.setAttribute("x", String(Math.min(994, (m.seq / count) * 1000)));
    rect.setAttribute("y", "2");
    rect.setAttribute("width", "6");
    rect.setAttribute("height", "16");
    const title = document.createElementNS(ns, "title");
    title.textContent = `#${m.seq} · ${m.role} · ${when(m.created_at)}`;
    rect.append(title);
    rect.addEventListener("click", () => {
      const q = params();
      q.set("seq", String(m.seq));
      q.delete("start");
      go(q, true);
    });
    svg.append(rect);
  }
  fig.hidden = false;
}

// --- views and keys ------------------------------------------------------------------

function failed(err) {
  if (err instanceof ApiError && err.status === 401) return showLogin(err.message);
  status(err instanceof ApiError ? `${err.message} (${err.code})` : String(err));
  if (state.view) $("page-label").textContent = err.message;
}

function showLogin(message) {
  $("login").hidden = false;
  $("search-view").hidden = true;
  $("session-view").hidden = true;
  $("login-error").textContent = message && state.token ? message : "";
  $("token").focus();
}

function route() {
  const p = params();
  const inSession = p.has("sid");
  $("login").hidden = true;
  $("search-view").hidden = inSession;
  $("session-view").hidden = !inSession;
  if (inSession) return openSession(p);
  state.view = null;
  fillForm(p);
  if (p.has("q")) return runSearch(p, false);
  $("results").replaceChildren();
  $("histogram").hidden = true;
  $("more").hidden = true;
  status("");
  $("q").focus();
}

function back() {
  const p = params();
  for (const k of ["sid", "seq", "start"]) p.delete(k);
  go(p);
}

function typing(event) {
  const t = event.target;
  return t instanceof HTMLInputElement || t instanceof HTMLSelectElement || t instanceof HTMLTextAreaElement;
}

function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const inSession = !$("session-view").hidden;
  const inSearch = !$("search-view").hidden;
  if (event.key === "Escape") {
    if (inSession) return back();
    if (typing(event)) event.target.blur();
    return;
  }
  if (typing(event)) {
    if (inSearch && event.key === "ArrowDown" && event.target === $("q") && state.matches.length) {
      event.preventDefault();
      select(state.selected < 0 ? 0 : state.selected, true);
    }
    return;
  }
  if (inSearch) {
    if (event.key === "/") {
      event.preventDefault();
      $("q").focus();
      $("q").select();
    } else if (event.key === "j" || event.key === "ArrowDown") {
      event.preventDefault();
      select(state.selected + 1, true);
    } else if (event.key === "k" || event.key === "ArrowUp") {
      event.preventDefault();
      if (state.selected <= 0) $("q").focus();
      else select(state.selected - 1, true);
    } else if (event.key === "Enter" && state.selected >= 0) {
      event.preventDefault();
      openMatch(state.selected);
    }
  } else if (inSession) {
    if (event.key === "n") page(1);
    else if (event.key === "p") page(-1);
  }
}

async function start() {
  state.token = loadToken();
  $("login-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    state.token = $("token").value.trim();
    try {
      state.who = await api("/v1/whoami");
    } catch (err) {
      $("login-error").textContent = err.message;
      return;
    }
    saveToken(state.token, $("remember").checked);
    $("token").value = "";
    signedIn();
  });
  $("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    go(searchParamsFromForm());
  });
  for (const id of ["f-kind", "f-role", "f-since", "f-until", "f-all"]) {
    $(id).addEventListener("change", () => go(searchParamsFromForm()));
  }
  $("more").addEventListener("click", () => runSearch(params(), true));
  $("back").addEventListener("click", back);
  $("prev-page").addEventListener("click", () => page(-1));
  $("next-page").addEventListener("click", () => page(1));
  $("forget-token").addEventListener("click", () => {
    forgetToken();
    showLogin("");
  });
  window.addEventListener("popstate", route);
  document.addEventListener("keydown", onKey);
  try {
    state.who = await api("/v1/whoami");
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return showLogin("");
    return failed(err);
  }
  signedIn();
}

function signedIn() {
  const who = state.who;
  let scope = "workspace " + who.workspace_id;
  if (who.session_id) scope += " · session " + who.session_id;
  $("scope").textContent = scope;
  $("forget-token").hidden = !who.token_id;
  if (who.session_id) {
    $("f-session").value = who.session_id;
    $("f-session").readOnly = true;
  }
  route();
}

document.addEventListener("DOMContentLoaded", start);
