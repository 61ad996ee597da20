"""Strings that are not secrets and must come out of the redactor unchanged.

Drawn from a seeded ``random.Random`` (digests, ids, base64 of random bytes, identifiers, paths)
plus hand-written lists (model names, prose and code that mention passwords or tokens, query
strings, AWS's documentation example keys). :func:`benign` gives ``{category: [strings]}``,
:func:`benign_dicts` dicts whose keys sound secret-ish but are not (``max_tokens``, ``token`` of
a logprob, ``next_page_token``), and :data:`BENIGN_ENV` an environment with no secret in it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import uuid

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "model",
    "token",
    "tokenizer",
    "prompt",
    "cache",
    "secret",
    "password",
    "key",
    "value",
    "report",
    "annual",
    "summary",
    "budget",
    "invoice",
    "customer",
    "order",
    "billing",
    "service",
    "deploy",
    "staging",
    "prod",
    "user",
    "profile",
    "settings",
    "config",
    "handler",
    "request",
    "response",
    "stream",
    "chunk",
    "event",
    "record",
    "replay",
    "basic",
    "bearer",
    "access",
    "public",
    "private",
    "sort",
    "partition",
    "index",
    "shard",
    "query",
    "result",
    "vector",
]

MODEL_NAMES = [
    "gpt-4o-mini",
    "gpt-4o",
    "gpt-4.1",
    "gpt-4.1-mini",
    "gpt-4.1-nano",
    "gpt-5",
    "gpt-5-mini",
    "o1",
    "o1-mini",
    "o3",
    "o3-mini",
    "o4-mini",
    "gpt-3.5-turbo-0125",
    "text-embedding-3-large",
    "text-embedding-3-small",
    "claude-sonnet-4-5",
    "claude-sonnet-4-5-20250929",
    "claude-opus-4-1-20250805",
    "claude-3-5-sonnet-20241022",
    "claude-3-5-haiku-latest",
    "claude-3-opus-20240229",
    "claude-haiku-4-5",
    "gemini-2.5-pro",
    "gemini-2.5-flash",
    "gemini-2.0-flash-001",
    "gemini-1.5-pro-002",
    "text-bison-001",
    "mistral-large-latest",
    "mistral-small-2409",
    "codestral-2501",
    "open-mixtral-8x22b",
    "llama-3.1-70b-instruct",
    "llama-3.3-70b-versatile",
    "meta-llama/Llama-3.3-70B-Instruct",
    "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "deepseek-chat",
    "deepseek-reasoner",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
    "qwen2.5-coder-32b-instruct",
    "Qwen/Qwen2.5-72B-Instruct",
    "google/gemma-2-9b-it",
    "sentence-transformers/all-MiniLM-L6-v2",
    "bert-base-uncased",
    "roberta-large-mnli",
    "openai:gpt-4o-mini",
    "anthropic:claude-sonnet-4-5",
    "gemini:gemini-2.5-flash",
    "scripted:echo",
    "grok-4",
    "grok-3-mini",
    "sonar-pro",
    "command-r-plus-08-2024",
    "jamba-1.5-large",
    "accounts/fireworks/models/llama-v3p1-405b-instruct",
]

PROSE = [
    "Forgot your password? Reset it from the login page.",
    "The tokenizer splits text into tokens before the model sees it.",
    "Use Bearer authentication for the API; the basic idea is simple.",
    "password: must be at least 12 characters long",
    "Password: changed successfully for user alice",
    "The secret to good bread is time.",
    "Press any key to continue.",
    "Set the API key in the OPENAI_API_KEY environment variable.",
    "Never commit your password or token to git.",
    "Basic concepts of Basic Identical types",
    "The bearer bond was redeemed in 1998.",
    "Rotate the secret every 90 days; store it in the vault.",
    "a sketch of the skeleton, task-ant-farm, ask-me-anything",
    "mail alice@example.com, not https://example.com/@alice",
    "ssh://git@github.com/org/repo.git and git@github.com:org/repo.git",
    "See https://docs.python.org/3/library/secrets.html#secrets.token_urlsafe",
    "The key insight: caching makes the second call free.",
    "token usage: 1,024 prompt tokens, 256 completion tokens",
    "Enter password: ",
    "passwords: list[str] = []",
    "password (str): The password of the account.",
    "AUTHORS.md lists every author; see also the authority file.",
    "the value of max_tokens is 4096",
    "a secret: none",
    "export TOKENIZERS_PARALLELISM=false",
]

CODE = [
    'password = os.environ["DB_PASSWORD"]',
    "password = getpass.getpass()",
    'token = response.json()["access_token"]',
    "api_key: str | None = None",
    "api_key: Optional[str] = None",
    "def login(username: str, password: str) -> Session:",
    "client = OpenAI(api_key=api_key)",
    "client = OpenAI(api_key=self._api_key)",
    "password=password,",
    "secret_key = settings.SECRET_KEY",
    '"password": {"type": "string", "minLength": 12}',
    "headers = {'Authorization': f'Bearer {token}'}",
    "if token is None: raise ValueError('no token')",
    "tokens = tokenizer.encode(text)",
    "for key, value in sorted(items.items()):",
    "max_tokens=1024, temperature=0.2",
    "process.env.API_KEY",
    "api_key = ${OPENAI_API_KEY}",
    "api_key = env:OPENAI_API_KEY",
    "password: <your password here>",
    "token: ********",
    "DB_PASSWORD=changeme",
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS_SECRET_ACCESS_KEY=je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
    "AKIAI44QH8DHBEXAMPLE",
    "api_key: your-api-key-here",
    "OPENAI_API_KEY=sk-...",
    "Authorization: Bearer <token>",
    "Authorization: Basic <credentials>",
    "postgres://user:password@localhost:5432/db",
    "postgres://user:${DB_PASSWORD}@db:5432/app",
    "redis://localhost:6379/0",
    # lines of real libraries that once looked secret to a draft of the rules
    "SERVER_AUTH = '1.3.6.1.5.5.7.3.1'",
    "sqlite3.SQLITE_AUTH: IndexFault.READ_ONLY,",
    '"AWS::SecretsManager::Secret": "c85175a4ebcce361",',
    '"Resource": "arn:aws:secretsmanager:*:*:secret:aws/ssm/3p/*",',
    "self.key_password = key_password",
    "trust_password=trust_password,",
    "credentials: Credentials",
    "client_secret: ClientSecret",
    "client_secret: Configuration options for the generated client secret.",
    "TokenEndpointAuth: TypeAlias = Union[",
    "RSAPrivateKey = rfc3447.RSAPrivateKey",
    "MLKEM768X25519PrivateKey = rust_openssl.hpke.MLKEM768X25519PrivateKey",
    '"passphrase": "string?",',
    "username, secret_password = user_pass",
    "username, password = credentials",
    "pkey = serialization.load_pem_private_key(key, password=passphrase)",
    "expected_authorization: str | None,",
    'CREDENTIALS = "GOOGLE_APPLICATION_CREDENTIALS"',
    'ACL_CREDENTIALS = "Access-Control-Allow-Credentials"',
    'CURVE_TYPE_LIB_KEY = "com.github.googlei18n.cu2qu.curve_type"',
    'publicKeyToken="1fc8b3b9a1e18e3b"',
    'self.update_token = "1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d"',
    'creds = " --username=%s --password=%s" % (user, pw)',
    ":type credentials: :py:class:`~botocore.credentials.Credentials`",
    '_SK_START = b"-----BEGIN OPENSSH PRIVATE KEY-----"',
    "'AUTHORIZATION': 'Bearer github_pat_XXXX',",
    "'headers': {'Authorization': 'Bearer test_token'},",
    ".. _Application Default Credentials: https://developers.google.com/identity",
]

QUERY_STRINGS = [
    "?key=reports/2024/annual-summary.pdf",
    "https://bucket.s3.amazonaws.com/?list-type=2&prefix=logs/2024/&max-keys=100",
    "https://example.com/search?q=key&key=short",
    "https://api.example.com/items?sort=desc&limit=50&page=3",
    "https://example.com/?utm_source=newsletter&utm_medium=email&utm_campaign=spring-2024",
    "/v1/files?purpose=fine-tune&order=desc",
    "?token_type=bearer&expires_in=3600",
    "https://maps.example.com/geo?address=10+Downing+St&key=map-style-basic",
    "https://www.google.com/search?q=how+to+rotate+an+api+key",
]

SK_WORDS = [
    "sk-three-bounce-animation-wrapper",
    "sk-circle-fade-delay",
    "sk-folding-cube-angle",
    "sk-chasing-dots-container",
    "task-runner-configuration-file",
    "desk-lamp-led-2024",
    "risk-free-rate-estimation",
    "whisk-fern-growth-notes",
    "kiosk-mode-display-settings",
    "disk-usage-report-2024-q3",
    "flask-sqlalchemy-session-scope",
    "ask-me-anything-session",
    "sk-",
    "sk-1",
    "sk-short-key",
    "mask-rcnn-resnet50-fpn",
    "asterisk-sip-trunk-config",
    "sk-learn",
    "husk-and-kernel",
    "dusk-till-dawn-playlist-2023",
]


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _identifier(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(3, 7))]
    style = rng.randrange(4)
    if style == 0:
        return "_".join(words)
    if style == 1:
        return words[0] + "".join(w.title() for w in words[1:])
    if style == 2:
        return "-".join(words) + f"-{rng.randint(1, 2025)}"
    return "".join(w.title() for w in words) + ("V2" if rng.random() < 0.5 else "")


def _path(rng: random.Random) -> str:
    parts = [rng.choice(WORDS) for _ in range(rng.randint(2, 6))]
    style = rng.randrange(4)
    name = f"{rng.choice(WORDS)}_{rng.choice(WORDS)}.{rng.choice(['py', 'ts', 'json', 'md'])}"
    if style == 0:
        return "/srv/app/" + "/".join(parts) + "/" + name
    if style == 1:
        return "C:\\Users\\dev\\" + "\\".join(parts) + "\\" + name
    if style == 2:
        return "~/.config/" + "/".join(parts)
    return "node_modules/@" + "/".join(parts) + "/dist/index.min.js"


def _b64(rng: random.Random, n: int, urlsafe: bool = False) -> str:
    data = rng.randbytes(n)
    return (base64.urlsafe_b64encode(data) if urlsafe else base64.b64encode(data)).decode()


def _image(rng: random.Random) -> str:
    header = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" if rng.random() < 0.5 else b"\xff\xd8\xff\xe0"
    data = header + rng.randbytes(rng.randint(40, 3000))
    return (
        f"data:image/{'png' if header[1] == 0x50 else 'jpeg'};base64,"
        + base64.b64encode(data).decode()
    )


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))).capitalize() + "."


def benign(seed: int = 20261201) -> dict[str, list[str]]:
    """Every benign string by category (about 2,800 in all)."""
    rng = random.Random(seed)
    out: dict[str, list[str]] = {
        "sha256 digests": [f"sha256:{_hex(rng, 64)}" for _ in range(100)]
        + [_hex(rng, 64) for _ in range(100)],
        "git SHAs": [_hex(rng, 40) for _ in range(100)] + [_hex(rng, 12) for _ in range(30)],
        "UUIDs": [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(100)]
        + [str(uuid.UUID(int=rng.getrandbits(128))).upper() for _ in range(20)]
        + [f"urn:uuid:{uuid.UUID(int=rng.getrandbits(128), version=1)}" for _ in range(20)],
        "base64 images": [_image(rng) for _ in range(60)],
        "base64 of random bytes": [_b64(rng, rng.randint(12, 300)) for _ in range(300)],
        "URL-safe base64": [_b64(rng, rng.randint(12, 64), urlsafe=True) for _ in range(2000)],
        "base64 of plain text": [
            base64.b64encode((_sentence(rng) + " " + _sentence(rng)).encode()).decode()
            for _ in range(60)
        ]
        + [
            base64.b64encode(json.dumps({"user": "alice", "n": i}).encode()).decode()
            for i in range(20)
        ],
        "integrity hashes": [
            f"sha{bits}-"
            + base64.b64encode(hashlib.new(f"sha{bits}", rng.randbytes(8)).digest()).decode()
            for bits in (256, 384, 512)
            for _ in range(20)
        ],
        "model names": list(MODEL_NAMES),
        "file paths": [_path(rng) for _ in range(200)],
        "long identifiers": [_identifier(rng) for _ in range(300)],
        "words with sk-": list(SK_WORDS),
        "query strings": list(QUERY_STRINGS)
        + [f"https://api.example.com/v1/list?page_token={_b64(rng, 30, True)}" for _ in range(20)]
        + [f"?next_token={_hex(rng, 32)}&limit=100" for _ in range(20)]
        + [
            f"https://example.com/cb?state={_hex(rng, 16)}&code_challenge_method=S256"
            for _ in range(10)
        ],
        "prose and code": PROSE + CODE + [_sentence(rng) for _ in range(100)],
        "public keys": [
            f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{_b64(rng, 32)[:43]} dev@laptop"
            for _ in range(10)
        ]
        + [f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ{_b64(rng, 256)} ci@build" for _ in range(10)]
        + ["-----BEGIN PUBLIC KEY-----\n" + _b64(rng, 48) + "\n-----END PUBLIC KEY-----"],
        "misc": [".".join(str(rng.randint(0, 255)) for _ in range(4)) for _ in range(10)]
        + [f"#{_hex(rng, 6)}" for _ in range(10)]
        + [
            f"v{rng.randint(0, 9)}.{rng.randint(0, 99)}.{rng.randint(0, 999)}-rc{rng.randint(1, 9)}"
            for _ in range(10)
        ]
        + [f"python@sha256:{_hex(rng, 64)}" for _ in range(10)]
        + [
            "2024-06-01T12:34:56.789Z",
            "3.14159",
            "42",
            "user@example.com",
            "[REDACTED:openai:0123abcd]",
        ],
    }
    return out


def benign_dicts() -> list[dict[str, object]]:
    """Dicts whose keys look secret-ish but are not; their values must stay."""
    rng = random.Random(7)
    return [
        {"token": "Hello", "logprob": -0.31, "bytes": [72, 101]},
        {"top_logprobs": [{"token": " world", "logprob": -1.2}]},
        {"max_tokens": 1024, "input_tokens": 12, "output_tokens": "7"},
        {"next_page_token": _b64(rng, 30, True), "page_token": _hex(rng, 24)},
        {"eos_token": "</s>", "pad_token": "<pad>", "bos_token": "<s>"},
        {"tokenizer": "cl100k_base", "tokenizer_name": "bert-base-uncased"},
        {"public_key": f"ssh-ed25519 AAAAC3Nza{_b64(rng, 32)}", "sort_key": _hex(rng, 16)},
        {"key": "reports/2024/annual-summary.pdf", "partition_key": "tenant-42"},
        {"credentials": "include", "mode": "cors"},
        {"api_key": "env:OPENAI_API_KEY", "authorization": "${API_TOKEN}"},
        {"secret_name": "prod/db/credentials", "token_type": "bearer", "key_id": "k-123"},
        {"csrf_token_header": "X-CSRFToken", "password_min_length": 12},
        {"PWD": "/work/main", "OLDPWD": "/work", "HOME": "/root"},
    ]


#: An environment with secret-looking names and no secret in it.
BENIGN_ENV: dict[str, str] = {
    "TOKENIZER_NAME": "bert-base-uncased-whole-word-masking",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HOME": "/root/.cache/huggingface",
    "PWD": "/work/main/src",
    "OLDPWD": "/work/main",
    "SSH_AUTH_SOCK": "/tmp/ssh-XXXXabcd/agent.1234",
    "GIT_AUTHOR_NAME": "Alice Example",
    "XAUTHORITY": "/home/alice/.Xauthority",
    "SECRET_NAME": "prod/db/credentials",
    "MAX_TOKENS": "4096",
    "KEY_PREFIX": "prod-tenant-",
    "GOOGLE_APPLICATION_CREDENTIALS": "/etc/gcp/service-account.json",
    "DB_PASSWORD": "postgres",
    "API_KEY": "changeme",
    "PUBLIC_KEY": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBenignBenign",
    "RAR_HOME": "/var/lib/rar/runs",
    "CUDA_VISIBLE_DEVICES": "0,1",
    "PYTHONHASHSEED": "0",
}
