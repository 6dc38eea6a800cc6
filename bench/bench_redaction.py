"""Redaction quality and speed: planted secrets removed, real-looking non-secrets kept.

    python bench/bench_redaction.py [--seed 23] [--per-kind 10] [--mb 20]

Plants ``--per-kind`` secrets of each of 30 shapes (AWS, GCP, Azure, GitHub, GitLab, Slack,
Stripe, Twilio, OpenAI, Anthropic, JWTs, private keys, URL and database passwords, env dumps,
JSON fields, ...), every one random but of its provider's real format, into the places a
session holds them: tool outputs (``env``, ``cat .env``, ``docker inspect``, ``git remote
-v``, curl commands), file contents (config files, ``.npmrc``, ``~/.aws/credentials``,
``id_rsa``), URLs, env dumps and JSON (as text, and as tool-call arguments through
``Redactor.value``). Beside them, real-looking non-secrets: git shas, UUIDs, base64 images
(``data:`` URLs, wrapped and single-line base64 blobs), lockfile hashes (npm, yarn, pnpm,
poetry, Cargo, go.sum, pip), hex digests, docker digests, SSH public keys, certificates, file
paths, URLs without passwords, code that names secrets without holding one.

It prints:
- the share of secrets removed (a secret counts as removed when no 16-character piece of it
  is left), per kind, and each one missed; goal >= 99%;
- the share of non-secrets changed (false positives), and each one; goal <= 1%;
- redactions in contextree's own source and docs (no secrets there: each is a false positive);
- throughput of ``Redactor.text`` in MB/s over ``--mb`` MB of mixed session text, with and
  without detect-secrets' plugins, beside a baseline in the same run (``str.count`` of one
  character, one pass over the same text).

The secrets are made here at run time from a seeded generator: none is a real credential,
and none is written in the repository.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import string
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from contextree.redaction import Redactor

ROOT = Path(__file__).resolve().parents[1]
ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"


@dataclass
class Planted:
    """A secret: its kind and the pieces of it that must not survive (one, or the lines of a
    key block)."""

    kind: str
    pieces: list[str]


@dataclass
class Doc:
    """A text as a session would hold it, and what was planted in it."""

    text: str
    secrets: list[Planted] = field(default_factory=list)
    keep: list[str] = field(default_factory=list)
    as_json: object | None = None  # also redact this value with Redactor.value


class Gen:
    """Random values of real shapes."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def s(self, alphabet: str, n: int) -> str:
        return "".join(self.r.choice(alphabet) for _ in range(n))

    def b64(self, nbytes: int, url: bool = False) -> str:
        raw = self.r.randbytes(nbytes)
        return (base64.urlsafe_b64encode(raw) if url else base64.b64encode(raw)).decode()

    def word(self) -> str:
        return self.r.choice(["alpha", "billing", "orders", "search", "payments", "auth",
                              "gateway", "worker", "ingest", "reports", "staging", "metrics"])

    def password(self) -> str:
        """What people pick: words, digits, a symbol; or a generated one."""
        if self.r.random() < 0.5:
            return (self.r.choice(["Summer", "Winter", "Dragon", "Monkey", "Shadow", "Falcon"])
                    + str(self.r.randint(10, 9999)) + self.r.choice("!@#$%&*"))
        return self.s(ALNUM + "!#%^*_-+=", self.r.randint(14, 28))

    def host(self) -> str:
        return f"{self.word()}-{self.r.randint(1, 9)}.{self.r.choice(['internal', 'example.com', 'corp.net', 'prod.svc.cluster.local'])}"

    def jwt(self) -> str:
        head = {"alg": self.r.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}
        body = {"sub": str(self.r.randint(10**6, 10**9)), "name": self.word(),
                "iat": self.r.randint(1_600_000_000, 1_800_000_000),
                "scope": self.r.choice(["read", "read write", "admin"])}

        def enc(o: object) -> str:
            return base64.urlsafe_b64encode(json.dumps(o).encode()).decode().rstrip("=")
        return f"{enc(head)}.{enc(body)}.{self.b64(32 if head['alg'] == 'HS256' else 64, True).rstrip('=')}"

    def pem_body(self, nbytes: int, width: int = 64) -> list[str]:
        body = self.b64(nbytes)
        return [body[i:i + width] for i in range(0, len(body), width)]


def _secret_makers(g: Gen) -> dict[str, Callable[[], tuple[str, list[str]]]]:
    """kind -> a maker of (the secret as written, the pieces that must go)."""

    def one(v: str) -> tuple[str, list[str]]:
        return v, [v]

    def pem(label: str, nbytes: int, width: int = 64) -> tuple[str, list[str]]:
        lines = g.pem_body(nbytes, width)
        text = f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n"
        return text, lines

    return {
        "aws-key": lambda: one(g.r.choice(["AKIA", "ASIA"]) + g.s(string.ascii_uppercase + "234567", 16)),
        "aws-secret": lambda: one(g.s(B64, 40)),
        "gcp-api-key": lambda: one("AIza" + g.s(B64URL, 35)),
        "gcp-service-account": lambda: pem("PRIVATE KEY", 1218),
        "azure-storage-key": lambda: one(g.b64(64)),
        "azure-client-secret": lambda: one(g.s(ALNUM, 3) + str(g.r.randint(0, 9)) + "Q~" + g.s(ALNUM + "_~.-", 34)),
        "azure-sas": lambda: one(quote(g.b64(32), safe="")),
        "github-token": lambda: one(g.r.choice(["ghp_", "gho_", "ghs_", "ghu_"]) + g.s(ALNUM, 36)),
        "github-fine-grained": lambda: one("github_pat_" + g.s(ALNUM, 22) + "_" + g.s(ALNUM, 59)),
        "gitlab-token": lambda: one("glpat-" + g.s(B64URL, 20)),
        "slack-token": lambda: one(f"xox{g.r.choice('bp')}-{g.s(string.digits, 12)}-{g.s(string.digits, 13)}-{g.s(ALNUM, 24)}"),
        "slack-webhook": lambda: one(f"T{g.s(string.ascii_uppercase + string.digits, 10)}/B{g.s(string.ascii_uppercase + string.digits, 10)}/{g.s(ALNUM, 24)}"),
        "stripe-key": lambda: one(g.r.choice(["sk_live_", "rk_live_", "sk_test_"]) + g.s(ALNUM, g.r.choice([24, 99]))),
        "twilio-sid": lambda: one("AC" + g.s(HEX, 32)),
        "twilio-auth-token": lambda: one(g.s(HEX, 32)),
        "openai-key": lambda: one(g.r.choice([
            "sk-proj-" + g.s(B64URL, 156), "sk-" + g.s(ALNUM, 20) + "T3BlbkFJ" + g.s(ALNUM, 20),
            "sk-svcacct-" + g.s(B64URL, 100)])),
        "anthropic-key": lambda: one("sk-ant-api03-" + g.s(B64URL, 93) + "AA"),
        "jwt": lambda: one(g.jwt()),
        "private-key": lambda: g.r.choice([
            lambda: pem("RSA PRIVATE KEY", 1190), lambda: pem("OPENSSH PRIVATE KEY", 390, 70),
            lambda: pem("EC PRIVATE KEY", 121)])(),
        "url-password": lambda: one(quote(g.password(), safe="")),
        "db-password": lambda: one(quote(g.password(), safe="")),
        "env-password": lambda: one(g.password()),
        "json-password": lambda: one(g.password()),
        "npm-token": lambda: one("npm_" + g.s(ALNUM, 36)),
        "sendgrid-key": lambda: one("SG." + g.s(B64URL, 22) + "." + g.s(B64URL, 43)),
        "huggingface-token": lambda: one("hf_" + g.s(ALNUM, 34)),
        "telegram-token": lambda: one(f"{g.r.randint(10**8, 10**10 - 1)}:AA{g.s(B64URL, 33)}"),
        "basic-auth": lambda: one(base64.b64encode(f"{g.word()}:{g.password()}".encode()).decode()),
        "bearer-token": lambda: one(g.s(ALNUM + "-._~", 40)),
        "django-secret-key": lambda: one("django-insecure-" + g.s(string.ascii_lowercase + string.digits + "!@#$%^&*(-_=+)", 50)),
    }


def _place(g: Gen, kind: str, value: str) -> tuple[str, object | None]:
    """A text (and maybe a JSON value) a session would hold, with ``value`` in it."""
    w, h, r = g.word(), g.host(), g.r
    user = r.choice(["admin", "deploy", "app", "root", "ci-bot", "svc_" + w])
    env_noise = "\n".join([f"HOME=/home/{user}", "SHELL=/bin/bash", f"PWD=/srv/{w}",
                           "LANG=C.UTF-8", f"PATH=/usr/local/bin:/usr/bin:/home/{user}/.local/bin"])
    if kind == "aws-key":
        return r.choice([
            f"$ env | grep AWS\nAWS_ACCESS_KEY_ID={value}\nAWS_DEFAULT_REGION=eu-west-1\n",
            f"[default]\naws_access_key_id = {value}\nregion = us-east-1\n",
            f'{{"AccessKey": {{"UserName": "{user}", "AccessKeyId": "{value}", "Status": "Active"}}}}',
            f"Using credentials {value} from the shared file for profile {w}",
        ]), None
    if kind == "aws-secret":
        return r.choice([
            f"$ cat ~/.aws/credentials\n[default]\naws_access_key_id = AKIA{g.s(string.ascii_uppercase, 16)}\naws_secret_access_key = {value}\n",
            f"export AWS_SECRET_ACCESS_KEY={value}\n",
            f'{{"Credentials": {{"SecretAccessKey": "{value}", "Expiration": "2026-12-01T10:00:00Z"}}}}',
        ]), None
    if kind == "gcp-api-key":
        return r.choice([f"https://maps.googleapis.com/maps/api/geocode/json?address=x&key={value}",
                         f"GOOGLE_API_KEY={value}", f'const firebaseConfig = {{ apiKey: "{value}", projectId: "{w}" }};']), None
    if kind == "gcp-service-account":
        obj = {"type": "service_account", "project_id": f"{w}-{r.randint(100, 999)}",
               "private_key_id": g.s(HEX, 40), "private_key": value,
               "client_email": f"{w}@{w}.iam.gserviceaccount.com"}
        return json.dumps(obj, indent=2), obj
    if kind == "azure-storage-key":
        return f"AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName={w}store;AccountKey={value};EndpointSuffix=core.windows.net", None
    if kind == "azure-client-secret":
        return r.choice([f"AZURE_CLIENT_SECRET={value}", f"az login --service-principal -u {uuid.UUID(int=r.getrandbits(128))} -p {value} --tenant {w}",
                         f'{{"appId": "{uuid.UUID(int=r.getrandbits(128))}", "password": "{value}", "tenant": "{uuid.UUID(int=r.getrandbits(128))}"}}']), None
    if kind == "azure-sas":
        return f"curl 'https://{w}store.blob.core.windows.net/backups/db.tar.gz?sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-12-31T00:00:00Z&st=2026-01-01T00:00:00Z&spr=https&sig={value}'", None
    if kind in ("github-token", "github-fine-grained"):
        return r.choice([
            f"$ git remote -v\norigin\thttps://{user}:{value}@github.com/acme/{w}.git (fetch)\n",
            f"GITHUB_TOKEN={value}\n", f'curl -H "Authorization: token {value}" https://api.github.com/user',
            f"gh auth status\n  ✓ Logged in to github.com account {user} (keyring)\n  - Token: {value}\n",
        ]), None
    if kind == "gitlab-token":
        return r.choice([f"git clone https://oauth2:{value}@gitlab.com/acme/{w}.git",
                         f'curl --header "PRIVATE-TOKEN: {value}" https://gitlab.example.com/api/v4/projects']), None
    if kind == "slack-token":
        return r.choice([f"SLACK_BOT_TOKEN={value}", f'client = WebClient(token="{value}")']), None
    if kind == "slack-webhook":
        return f"curl -X POST -H 'Content-type: application/json' --data '{{\"text\":\"deployed\"}}' https://hooks.slack.com/services/{value}", None
    if kind == "stripe-key":
        return r.choice([f"STRIPE_SECRET_KEY={value}", f"stripe.api_key = '{value}'",
                         f"curl https://api.stripe.com/v1/charges -u {value}:"]), None
    if kind == "twilio-sid":
        return f"client = Client('{value}', os.environ['TWILIO_AUTH_TOKEN'])", None
    if kind == "twilio-auth-token":
        return r.choice([f"TWILIO_ACCOUNT_SID=AC{g.s(HEX, 32)}\nTWILIO_AUTH_TOKEN={value}\n",
                         f'{{"account_sid": "AC{g.s(HEX, 32)}", "auth_token": "{value}"}}']), None
    if kind == "openai-key":
        return r.choice([f"OPENAI_API_KEY={value}", f'client = OpenAI(api_key="{value}")',
                         f"Error code: 401 - Incorrect API key provided: {value}."]), None
    if kind == "anthropic-key":
        return r.choice([f"export ANTHROPIC_API_KEY={value}", f"x-api-key: {value}",
                         f'{{"env": {{"ANTHROPIC_API_KEY": "{value}"}}}}']), None
    if kind == "jwt":
        return r.choice([f"Authorization: Bearer {value}", f'{{"access_token": "{value}", "token_type": "Bearer", "expires_in": 3600}}',
                         f"Set-Cookie: session={value}; Path=/; HttpOnly", f"the token {value} expired"]), None
    if kind == "private-key":
        return r.choice([f"$ cat ~/.ssh/id_rsa\n{value}", f"# deploy key\n{value}\n# end",
                         json.dumps({"key": value})]), None
    if kind == "url-password":
        return r.choice([f"https://{user}:{value}@{h}/api/v1/status", f"pip install --index-url https://{user}:{value}@pypi.{h}/simple/ pkg",
                         f"Fetching http://{user}:{value}@{h}:8080/metrics"]), None
    if kind == "db-password":
        scheme = r.choice(["postgres", "postgresql", "mysql", "mongodb+srv", "redis", "amqp"])
        return r.choice([f"DATABASE_URL={scheme}://{user}:{value}@{h}:5432/{w}",
                         f"sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) connection to {scheme}://{user}:{value}@{h}/{w} failed",
                         f'{{"dsn": "{scheme}://{user}:{value}@{h}/{w}"}}']), None
    if kind == "env-password":
        name = r.choice(["DB_PASSWORD", "POSTGRES_PASSWORD", "MYSQL_ROOT_PASSWORD", "REDIS_PASSWORD",
                         "SMTP_PASS", "ADMIN_PASSWORD", "LDAP_BIND_PASSWORD", "KEYCLOAK_ADMIN_PASSWORD"])
        return r.choice([f"$ env\n{env_noise}\n{name}={value}\nTERM=xterm\n",
                         f"{name}='{value}'\n", f'docker run -e {name}="{value}" postgres:16',
                         f"  - name: {name}\n    value: \"{value}\"\n"]), None
    if kind == "json-password":
        key = r.choice(["password", "db_password", "adminPassword", "passwd", "client_secret", "secret"])
        obj = {"host": h, "user": user, key: value, "port": 5432, "ssl": True}
        return json.dumps(obj), obj
    if kind == "npm-token":
        return r.choice([f"//registry.npmjs.org/:_authToken={value}\n", f"NPM_TOKEN={value}"]), None
    if kind == "sendgrid-key":
        return f"SENDGRID_API_KEY={value}", None
    if kind == "huggingface-token":
        return r.choice([f"HF_TOKEN={value}", f"huggingface-cli login --token {value}"]), None
    if kind == "telegram-token":
        return f"curl https://api.telegram.org/bot{value}/sendMessage -d chat_id=1 -d text=hi", None
    if kind == "basic-auth":
        return r.choice([f"Authorization: Basic {value}", f'curl -H "Authorization: Basic {value}" https://{h}/']), None
    if kind == "bearer-token":
        return f"curl -s -H 'Authorization: Bearer {value}' https://{h}/v1/items", None
    if kind == "django-secret-key":
        return f"SECRET_KEY = '{value}'", None
    raise KeyError(kind)


def _non_secrets(g: Gen, n: int) -> list[tuple[str, list[str]]]:
    """``n`` texts of real-looking non-secrets, with the pieces that must survive."""
    r = g.r
    out: list[tuple[str, list[str]]] = []

    def sha() -> str:
        return g.s(HEX, 40)

    def u() -> str:
        return str(uuid.UUID(int=r.getrandbits(128), version=4))

    makers: list[Callable[[], tuple[str, list[str]]]] = [
        lambda: (lambda s: (f"commit {s}\nAuthor: Dev <dev@example.com>\n\n    fix the parser\n", [s]))(sha()),
        lambda: (lambda s: (f"[main {s[:7]}] fix the parser\n 2 files changed", [s[:7]]))(sha()),
        lambda: (lambda a, b: (f"Merge: {a[:12]} {b[:12]}\n{a}", [a, b[:12]]))(sha(), sha()),
        lambda: (lambda x: (f'{{"request_id": "{x}", "status": "ok"}}', [x]))(u()),
        lambda: (lambda x: (f"Created volume {x.upper()}", [x.upper()]))(u()),
        lambda: (lambda b: (f"![chart](data:image/png;base64,{b})", [b]))(g.b64(r.randint(100, 3000))),
        lambda: (lambda b: (f'<img src="data:image/jpeg;base64,{b}" alt="x">', [b]))(g.b64(r.randint(50, 500))),
        lambda: (lambda lines: ("$ base64 logo.png\n" + "\n".join(lines) + "\n", lines))(g.pem_body(r.randint(200, 2000), 76)),
        lambda: (lambda b: (f"$ base64 -w0 icon.png\n{b}\n", [b]))(g.b64(r.randint(400, 4000))),
        lambda: (lambda b: (f'"node_modules/{g.word()}": {{\n  "version": "1.2.{r.randint(0, 9)}",\n  "resolved": "https://registry.npmjs.org/{g.word()}/-/{g.word()}-1.2.3.tgz",\n  "integrity": "sha512-{b}"\n}}', [b]))(g.b64(64)),
        lambda: (lambda b: (f'"{g.word()}@^2.0.0":\n  version "2.0.1"\n  integrity sha1-{b}\n', [b]))(g.b64(20)),
        lambda: (lambda b: (f"  resolution: {{integrity: sha512-{b}}}\n", [b]))(g.b64(64)),
        lambda: (lambda x: (f'{{file = "{g.word()}-1.0-py3-none-any.whl", hash = "sha256:{x}"}},', [x]))(g.s(HEX, 64)),
        lambda: (lambda x: (f'[[package]]\nname = "{g.word()}"\nversion = "0.4.1"\nchecksum = "{x}"\n', [x]))(g.s(HEX, 64)),
        lambda: (lambda b: (f"github.com/{g.word()}/{g.word()} v1.{r.randint(0, 20)}.0 h1:{b}\n", [b]))(g.b64(32)),
        lambda: (lambda b: (f"github.com/{g.word()}/{g.word()} v1.2.0/go.mod h1:{b}\n", [b]))(g.b64(32)),
        lambda: (lambda x: (f"{g.word()}==2.31.0 --hash=sha256:{x}", [x]))(g.s(HEX, 64)),
        lambda: (lambda x: (f"{x}  dist/{g.word()}-1.0.tar.gz", [x]))(g.s(HEX, r.choice([32, 40, 64, 128]))),
        lambda: (lambda x: (f"Digest: sha256:{x}\nStatus: Downloaded newer image", [x]))(g.s(HEX, 64)),
        lambda: (lambda b: (f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{b} dev@laptop", ["AAAAC3NzaC1lZDI1NTE5AAAAI" + b]))(g.s(B64, 43)),
        lambda: (lambda b: (f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQ{b} ci@runner", ["AAAAB3NzaC1yc2EAAAADAQABAAABgQ" + b]))(g.s(B64, 370)),
        lambda: (lambda lines: ("-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----\n", lines))(g.pem_body(900)),
        lambda: (lambda p: (f"  File \"{p}\", line {r.randint(1, 900)}, in run", [p]))(f"/home/dev/.venv/lib/python3.11/site-packages/{g.word()}/{g.word()}_v2/core.py"),
        lambda: (lambda p: (f"modified:   {p}", [p]))(f"src/components/{g.word().title()}Panel2/{g.word().title()}Card.tsx"),
        lambda: (lambda p: (p, [p]))(f"node_modules/.pnpm/@babel+core@7.24.{r.randint(0, 9)}/node_modules/@babel/core/lib/index.js"),
        lambda: (lambda p: (p, [p]))(f"C:\\Users\\Dev\\AppData\\Local\\Temp\\pytest-of-dev\\pytest-{r.randint(1, 99)}\\test_x0\\out.json"),
        lambda: ("git@github.com:acme/service.git", ["git@github.com:acme/service.git"]),
        lambda: ("postgresql://postgres@127.0.0.1:55432/postgres", ["postgresql://postgres@127.0.0.1:55432/postgres"]),
        lambda: (lambda x: (f"https://github.com/acme/{g.word()}/pull/{r.randint(1, 9999)}/commits/{x}", [x]))(sha()),
        lambda: ("max_tokens=4096, token_type=bearer", ["max_tokens=4096", "token_type=bearer"]),
        lambda: ('"tokens_before": 18234, "tokens_after": 4021', ['"tokens_before": 18234']),
        lambda: ("PASSWORD_MIN_LENGTH=12", ["PASSWORD_MIN_LENGTH=12"]),
        lambda: ("def login(user: str, password: str) -> Token:", ["password: str"]),
        lambda: ('api_key = os.environ["OPENAI_API_KEY"]', ['os.environ["OPENAI_API_KEY"]']),
        lambda: ("token = getpass.getpass()", ["getpass.getpass()"]),
        lambda: ("export GITHUB_TOKEN=$(gh auth token)", ["$(gh auth token)"]),
        lambda: ("password: ${DB_PASSWORD}", ["${DB_PASSWORD}"]),
        lambda: ('"password": "********"', ['"********"']),
        lambda: ("api_key: <your-api-key>", ["<your-api-key>"]),
        lambda: (lambda x: (f"arn:aws:iam::{x}:role/{g.word()}-deployer", [x]))(g.s(string.digits, 12)),
        lambda: (lambda x: (f"pod/{g.word()}-{x}-{g.s('bcdfghjklmnpqrstvwxz2456789', 5)} 1/1 Running", [x]))(g.s("bcdf23456789", 10)),
        lambda: (lambda x: (f"ETag: \"{x}\"", [x]))(g.s(HEX, 32)),
        lambda: (lambda x: (f"  useCallbackWithTimeout{r.randint(2, 9)}, TestHTTP2ConnectionPoolHandler, {x}", [x]))(f"test_redaction_entry_types_v{r.randint(2, 9)}"),
        lambda: (lambda x: (f"Build {x} finished in 42s", [x]))(f"{r.randint(2024, 2026)}{r.randint(1, 12):02d}{r.randint(1, 28):02d}T{r.randint(0, 23):02d}{r.randint(0, 59):02d}{r.randint(0, 59):02d}Z"),
        lambda: (lambda x: (f"Copying blob sha256:{x}", [x]))(g.s(HEX, 64)),
        lambda: (lambda x: (f"ipfs://{x}", [x]))("bafybei" + g.s("abcdefghijklmnopqrstuvwxyz234567", 52)),
        lambda: (lambda x: (f'<script src="https://cdn.example.com/lib.js" integrity="sha384-{x}" crossorigin="anonymous"></script>', [x]))(g.b64(48)),
    ]
    for i in range(n):
        out.append(makers[i % len(makers)]())
    r.shuffle(out)
    return out


def held_out(seed: int) -> tuple[list[Doc], list[tuple[str, list[str]]]]:
    """Contexts and non-secrets written after the detectors were tuned on the corpus above:
    how the figures carry over to places it does not have. Its first run removed 80.4% of
    its secrets (netrc, .pgpass and XML configs were missed) and changed none of its
    non-secrets; those three formats then got detectors."""
    g = Gen(seed + 99)
    mk = _secret_makers(g)
    r = g.r
    docs: list[Doc] = []

    def add(kind: str, template: str) -> None:
        value, pieces = mk[kind]()
        docs.append(Doc(template.format(v=value, h=g.host(), w=g.word()), [Planted(kind, pieces)]))

    for _ in range(4):
        add("aws-secret", 'resource "aws_iam_access_key" "ci" {{}}\naws_secret_key = "{v}"\n')
        add("db-password", "{w}:5432:{w}:admin:{v}\n")  # ~/.pgpass
        add("env-password", "machine {h} login deploy password {v}\n")  # ~/.netrc
        add("json-password", "spring.datasource.password={v}\nspring.datasource.url=jdbc:postgresql://{h}/app\n")
        add("env-password", "<property name=\"password\" value=\"{v}\"/>")
        add("env-password", "    environment:\n      MYSQL_PASSWORD: {v}\n")
        add("github-token", "2026-03-04T10:11:12Z DEBUG git push https://x-access-token:{v}@github.com/acme/{w}.git")
        add("stripe-key", "settings.py:  STRIPE_KEY = os.getenv('STRIPE_KEY', '{v}')")
        add("slack-token", "      - name: notify\n        run: curl -d token={v} https://slack.com/api/chat.postMessage")
        add("openai-key", "openai.AuthenticationError: Error code: 401 - {{'error': {{'message': 'Incorrect API key provided: {v}'}}}}")
        add("bearer-token", "> GET /v2/items HTTP/1.1\n> Host: {h}\n> Authorization: Bearer {v}\n> Accept: */*")
        add("aws-secret", "$ aws configure list\n      Name   Value   Type\nsecret_key   {v}   shared-credentials-file")
        add("jwt", "<input type=\"hidden\" name=\"csrf\" value=\"{v}\">")
        add("private-key", "Key fingerprint saved.\n{v}")
    keep: list[tuple[str, list[str]]] = []

    def k(text: str, *pieces: str) -> None:
        keep.append((text, list(pieces) or [text]))

    for _ in range(6):
        h = g.s(HEX, 8)
        k(f"dist/assets/index-{h}.js   142.3 kB │ gzip: 45.1 kB", f"index-{h}.js")
        cid = g.s(HEX, 64)
        k(f"CONTAINER ID   {cid[:12]}   postgres:16   Up 2 hours", cid[:12])
        k(f"require github.com/{g.word()}/x v0.0.0-2024010112{r.randint(1000, 9999)}-{g.s(HEX, 12)}")
        k(f"npm notice shasum: {g.s(HEX, 40)}")
        k(f"class=\"css-{g.s('abcdefghijklmnopqrstuvwxyz0123456789', 7)} e1{g.s(HEX, 6)}0\"")
        k(f"watch?v={g.s(B64URL, 11)}")
        k(f"Sending build context to Docker daemon  {r.randint(2, 900)}.{r.randint(0, 9)}MB")
        k(f"at com.acme.{g.word()}.internal.RetryingHttpClientFactoryImpl2.create(RetryingHttpClientFactoryImpl2.java:{r.randint(10, 900)})")
        k(f"Successfully installed {g.word()}-2.{r.randint(0, 30)}.{r.randint(0, 9)} urllib3-2.2.1")
        k(f"sha256:{g.s(HEX, 64)}")
        k(f"X-Request-Id: {uuid.UUID(int=r.getrandbits(128))}")
        k(f"  \"_resolved\": \"https://registry.npmjs.org/{g.word()}/-/{g.word()}-4.17.21.tgz\"")
        k(f"git checkout -b feature/{g.word()}-{r.randint(100, 999)}-add-retry-logic")
        k(f"{g.word()}_{g.word()}_v{r.randint(2, 9)}_migration_{r.randint(10**11, 10**12 - 1)}.py")
    return docs, keep


def score(r: Redactor, docs: list[Doc], keep: list[tuple[str, list[str]]]) -> tuple[float, float, list[str]]:
    """(% of the docs' secrets removed, % of ``keep`` changed, the misses and changes)."""
    total = removed = changed = 0
    notes: list[str] = []
    for d in docs:
        out = r.text(d.text)
        for p in d.secrets:
            total += 1
            if any(_survives(piece, out) for piece in p.pieces):
                notes.append(f"  missed {p.kind}: {out.strip()[:160]!r}")
            else:
                removed += 1
    for text, pieces in keep:
        out = r.text(text)
        if not all(piece in out for piece in pieces):
            changed += 1
            notes.append(f"  changed: {out.strip()[:160]!r}")
    return 100 * removed / max(total, 1), 100 * changed / max(len(keep), 1), notes


def corpus(seed: int, per_kind: int) -> tuple[list[Doc], list[tuple[str, list[str]]]]:
    """The planted documents (each secret in its context, with non-secrets beside it) and
    the non-secret texts."""
    g = Gen(seed)
    makers = _secret_makers(g)
    keep = _non_secrets(g, 1000)
    docs: list[Doc] = []
    k = 0
    for kind, make in makers.items():
        for _ in range(per_kind):
            value, pieces = make()
            text, obj = _place(g, kind, value)
            neighbour, kept = keep[k % len(keep)]
            k += 1
            docs.append(Doc(f"{neighbour}\n{text}\n", [Planted(kind, pieces)], list(kept), obj))
    return docs, keep


def _survives(piece: str, out: str) -> bool:
    """True when the piece, or any 16 characters of it, is still in ``out``."""
    if len(piece) <= 16:
        return piece in out
    return any(piece[i:i + 16] in out for i in range(0, len(piece) - 15))


def quality(seed: int, per_kind: int, detect_secrets: bool | None,
            batched: bool = False) -> tuple[float, float, list[str]]:
    """(% secrets removed, % non-secrets changed, report lines); ``batched``: every text
    through one ``Redactor.texts`` call, as the exits redact a session."""
    docs, keep = corpus(seed, per_kind)
    r = Redactor(detect_secrets=detect_secrets)
    if batched:
        done = dict(zip([d.text for d in docs] + [t for t, _ in keep],
                        r.texts([d.text for d in docs] + [t for t, _ in keep]), strict=True))
        redact = done.__getitem__
    else:
        redact = r.text
    total: Counter[str] = Counter()
    removed: Counter[str] = Counter()
    missed: list[str] = []
    for d in docs:
        outs = [redact(d.text)]
        if d.as_json is not None:
            outs.append(json.dumps(r.value(d.as_json)))
        for p in d.secrets:
            for out in outs:
                total[p.kind] += 1
                if not any(_survives(piece, out) for piece in p.pieces):
                    removed[p.kind] += 1
                else:
                    missed.append(f"  missed {p.kind}: {out.strip()[:160]!r}")
    changed = 0
    fps: list[str] = []
    for text, pieces in keep:
        out = redact(text)
        if not all(piece in out for piece in pieces):
            changed += 1
            fps.append(f"  changed: {out.strip()[:160]!r}")
    kept_in_docs = sum(1 for d in docs for piece in d.keep)
    kept_ok = sum(1 for d in docs for piece in d.keep if piece in redact(d.text))
    lines = [f"  {kind:22s} {removed[kind]:3d}/{total[kind]:3d}" for kind in sorted(total)]
    lines += missed[:20] + fps[:20]
    lines.append(f"  non-secrets beside secrets kept: {kept_ok}/{kept_in_docs}")
    n_secrets = sum(total.values())
    pct_removed = 100 * sum(removed.values()) / n_secrets
    pct_fp = 100 * (changed + kept_in_docs - kept_ok) / (len(keep) + kept_in_docs)
    lines.insert(0, f"  {n_secrets} planted secrets of {len(total)} kinds; "
                    f"{len(keep) + kept_in_docs} non-secrets")
    return pct_removed, pct_fp, lines


def own_source() -> tuple[int, int, Counter[str]]:
    """(bytes, redactions, kinds) over contextree's own source and docs."""
    files = sorted((ROOT / "src").rglob("*.py")) + sorted((ROOT / "docs").rglob("*.md"))
    files = [f for f in files if "redaction" not in f.parts and f.name != "redaction.md"]
    r = Redactor()
    size = 0
    for f in files:
        text = f.read_text(encoding="utf-8")
        size += len(text.encode())
        r.text(text)
    found = Counter(r.found)
    return size, sum(found.values()), found


def mixed_text(seed: int, mb: float) -> str:
    """About ``mb`` MB of session-like text: code, logs, JSON, base64 blobs, few secrets."""
    docs, keep = corpus(seed, 2)
    source = "".join(f.read_text(encoding="utf-8") for f in sorted((ROOT / "src").rglob("*.py")))
    parts: list[str] = []
    size = 0
    g = Gen(seed + 1)
    target = int(mb * 1_000_000)
    i = 0
    while size < target:
        choice = i % 10
        if choice < 5:
            start = g.r.randrange(0, max(1, len(source) - 20_000))
            chunk = source[start:start + 20_000]
        elif choice < 8:
            chunk = "\n".join(t for t, _ in keep[(i * 37) % 900:(i * 37) % 900 + 60])
        elif choice == 8:
            chunk = "\n".join(g.pem_body(30_000, 76))
        else:
            chunk = "\n".join(d.text for d in docs[(i * 7) % len(docs):(i * 7) % len(docs) + 5])
        parts.append(chunk)
        size += len(chunk)
        i += 1
    return "\n".join(parts)


def throughput(text: str, detect_secrets: bool | None, pieces: bool = False) -> tuple[float, float]:
    """MB/s of ``Redactor.text`` over ``text``, wall and CPU (the best of 2 runs each; on a
    shared machine the CPU figure is the steadier one); ``pieces``: of ``Redactor.texts``
    over the same text cut into session-sized texts (40 lines each), as the exits call it."""
    wall = cpu = float("inf")
    lines = text.split("\n")
    cut = ["\n".join(lines[i:i + 40]) for i in range(0, len(lines), 40)]
    for _ in range(2):
        r = Redactor(detect_secrets=detect_secrets)
        t, c = time.perf_counter(), time.process_time()
        if pieces:
            r.texts(cut)
        else:
            r.text(text)
        wall = min(wall, time.perf_counter() - t)
        cpu = min(cpu, time.process_time() - c)
    mb = len(text.encode()) / 1e6
    return mb / wall, mb / max(cpu, 1e-9)


def baseline(text: str) -> float:
    """MB/s of one C-speed pass over the text (``str.count``), the floor of any scan."""
    t = time.perf_counter()
    for _ in range(5):
        text.count("\x00")
    return 5 * len(text.encode()) / 1e6 / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--per-kind", type=int, default=10)
    ap.add_argument("--mb", type=float, default=20.0)
    args = ap.parse_args()
    from contextree.redaction._plugins import available
    modes: list[tuple[str, bool | None]] = [("built-in detectors only", False)]
    if available():
        modes.append(("with detect-secrets plugins", True))
        # the default of every exit: the plugins imported once a text passes their gate
        modes.append(("default (plugins behind their gate)", None))
    for name, mode in modes:
        removed, fp, lines = quality(args.seed, args.per_kind, mode)
        print(f"quality, {name}:")
        print("\n".join(lines))
        print(f"  secrets removed: {removed:.1f}% (goal >= 99%)   false positives: {fp:.2f}% "
              "(goal <= 1%)")
        docs, keep = held_out(args.seed)
        removed, fp, notes = score(Redactor(detect_secrets=mode), docs, keep)
        print(f"  held out (written after tuning; its first run: 80.4% / 0.0%, then its three "
              f"missed formats got detectors): {len(docs)} secrets removed: "
              f"{removed:.1f}%   {len(keep)} non-secrets changed: {fp:.1f}%")
        print("\n".join(notes[:30]))
        removed, fp, _ = quality(args.seed, args.per_kind, mode, batched=True)
        print(f"  the same, batched (one Redactor.texts call, as the exits redact): "
              f"removed {removed:.1f}%   false positives {fp:.2f}%")
    size, n, kinds = own_source()
    print(f"contextree's own source and docs: {size / 1e6:.1f} MB, {n} redactions "
          f"(each a false positive) {dict(kinds)}")
    text = mixed_text(args.seed, args.mb)
    print(f"throughput over {len(text.encode()) / 1e6:.1f} MB of mixed session text "
          f"(baseline str.count: {baseline(text):,.0f} MB/s):")
    for name, mode in modes:
        wall, cpu = throughput(text, mode)
        print(f"  {name}: {wall:.1f} MB/s wall, {cpu:.1f} MB/s of CPU (one text)")
        wall, cpu = throughput(text, mode, pieces=True)
        print(f"  {name}: {wall:.1f} MB/s wall, {cpu:.1f} MB/s of CPU (Redactor.texts over "
              "texts of 40 lines)")


if __name__ == "__main__":
    main()
