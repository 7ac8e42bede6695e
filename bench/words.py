"""Word material for the synthetic corpus: common English, technical terms, accents, CJK.

Kept apart from the generator so the lists do not bury its logic. Everything here is
plain data; the generator ranks it into a Zipf vocabulary.
"""

from __future__ import annotations

# Most frequent English words (function words first, as in real text).
COMMON = """
the to and of a in is it that for you this on with be we as are not i have can
was but or if at so by from will do an my what there all they one would should
just use need now then also when it's here more like get which how some out into
file error test run code change fix check add make new see time data work call
function value line way because update version first why issue other set build
looks still list path output command only return server config using case problem
type name about already try since way does want before back after look model go
query table default current job new now user message key missing log string found
""".split()

# Terms an agent session is full of, placed high in the ranking.
TECHNICAL = """
database migration scheduler timeout kubernetes deploy deployment staging production
postgres index vacuum analyze replica transaction rollback commit branch merge rebase
pipeline docker container image registry webhook endpoint payload request response
header cookie session token cache redis queue worker cron retry backoff latency
throughput memory allocation pointer segfault exception traceback stacktrace assertion
fixture pytest coverage linter formatter typing mypy ruff compile linker binary
dependency package lockfile virtualenv interpreter refactor regression benchmark
profiler flamegraph bottleneck concurrency deadlock mutex semaphore thread process
signal socket connection handshake certificate tls proxy gateway ingress namespace
cluster node pod service secret volume mount filesystem permission ownership chmod
symlink directory traversal parser tokenizer lexer grammar schema column constraint
foreign primary unique serial sequence trigger procedure view materialized partition
shard tenant workspace quota billing invoice subscription customer account password
authentication authorization oauth scope claim jwt signature checksum digest hash
encoding unicode utf8 normalisation locale timezone timestamp interval duration
serializer deserializer json yaml toml protobuf schema grpc graphql pagination cursor
offset limit filter sort ranking relevance embedding vector similarity tokenizer
frontend backend component render hook state props router template stylesheet layout
viewport accessibility translation localisation currency checkout cart catalogue
inventory shipment warehouse forecast metrics dashboard alert incident outage
postmortem runbook oncall escalation ticket backlog sprint milestone release changelog
semver tag artifact bucket upload download stream chunk buffer flush fsync journal
snapshot backup restore checkpoint wal archive compaction summary context prompt agent
assistant tool invocation argument parameter variable constant enum struct interface
trait generic closure lambda iterator generator coroutine async await future promise
callback event listener emitter observer subscriber publisher topic consumer producer
""".split()

# Short tokens (1-2 characters) that real sessions use as words.
SHORT = """
id db ui io os ci cd go js ts pr vm ip ok qa ux v2 v3 x y z k8 s3 ec t0 n1
""".split()

ERROR_NAMES = """
ValueError KeyError TypeError IndexError AttributeError RuntimeError ImportError
ModuleNotFoundError FileNotFoundError PermissionError TimeoutError ConnectionError
ConnectionRefusedError BrokenPipeError RecursionError AssertionError ZeroDivisionError
UnicodeDecodeError NotImplementedError OperationalError IntegrityError ProgrammingError
DeadlockDetected SerializationFailure UniqueViolation ForeignKeyViolation
NullPointerException IllegalArgumentException OutOfMemoryError StackOverflowError
ECONNREFUSED ECONNRESET ETIMEDOUT ENOENT EACCES EADDRINUSE ENOSPC EPIPE SIGSEGV
SIGKILL SIGTERM OOMKilled CrashLoopBackOff ImagePullBackOff ErrImagePull
""".split()

TOOLS = [
    "bash",
    "read_file",
    "edit_file",
    "write_file",
    "grep",
    "glob",
    "http_request",
    "sql_query",
    "kubectl",
    "python",
    "git",
    "web_search",
]

FILE_EXTS = ["py", "ts", "go", "rs", "sql", "yaml", "json", "md", "toml", "sh", "tsx", "java"]

# Words people write with accents; each folds to an ASCII search key.
ACCENTED = """
café naïve résumé déjà façade crème brûlée jalapeño piñata señor mañana über
Straße Zürich Kraków Łódź Gdańsk Dvořák Ærø smørrebrød Ångström Øresund Tromsø
Bjørn Đorđe Škoda Müller Köln Düsseldorf Göteborg Malmö Reykjavík São Paulo
Bogotá Medellín Curaçao Montréal Québec coöperate rôle élite fiancé entrée soufflé
protégé cliché doña niño año jürgen François Hélène Zoë Chloé Renée Noël Pokémon
Flabébé Éowyn Gödel Erdős Poincaré Fréchet Möbius Schrödinger Lévy Cauchy Tóth
""".split()

# Letters and the accented forms the generator may put in their place.
ACCENT_MAP: dict[str, str] = {
    "a": "áàâäå",
    "e": "éèêë",
    "i": "íìîï",
    "o": "óòôöø",
    "u": "úùûü",
    "n": "ñ",
    "c": "ç",
    "s": "š",
    "z": "ž",
    "l": "ł",
}

# Frequent Chinese characters, then kana and a few Hangul syllables.
CJK_CHARS = (
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会"
    "自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手"
    "十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法"
    "此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便"
    "数据库索引查询错误文件测试部署服务器配置缓存日志用户会话搜索结果时间版本更新"
    "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよ"
    "らりるれろわをんアイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホ"
    "マミムメモヤユヨラリルレロワヲンデータベースエラーテストサーバー"
    "데이터베이스오류검색서버설정로그사용자세션"
)

SYLLABLE_ONSETS = (
    "b c d f g h j k l m n p r s t v w z b c d f g k l m n p r s t br ch dr fl gr pl pr sh st tr"
).split()
SYLLABLE_VOWELS = "a e i o u a e i o u a e i o ai ea ou".split()
SYLLABLE_CODAS = ["", "", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck", "x"]
