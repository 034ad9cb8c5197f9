"""The providers the hub knows how to reach: endpoint, auth, wire formats and models.

A *wire* is a request shape: ``anthropic`` (the Messages API), ``openai``
(Chat Completions) or ``gemini`` (generateContent).  A preset names, for each
wire the provider serves, the base URL that wire is reached at; the gateway
forwards a call only to a provider that serves the caller's wire (it never
translates one shape into another, so nothing is lost on the way).

Local runners (ollama, llama.cpp, LM Studio, vLLM) are reached at the address
given with ``--base-url``; their presets carry the usual local default.
``mock`` answers in-process, in every wire, and calls nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...domain.models import MUSE_CONTRIBUTOR_MODELS, MUSE_MODELS

ANTHROPIC, OPENAI, GEMINI = "anthropic", "openai", "gemini"
WIRES = (ANTHROPIC, OPENAI, GEMINI)

#: How a provider's key travels: a header with the bare key, a bearer token, or nothing.
AUTH_KINDS = ("x-api-key", "bearer", "x-goog-api-key", "none")


@dataclass(frozen=True)
class Preset:
    id: str
    name: str
    wires: dict[str, str]  # wire -> base URL
    auth: str
    models: tuple[str, ...] = ()
    contributor_models: tuple[str, ...] = ()  # the provider may train on what they are sent
    local: bool = False  # a local runner: --base-url names the server
    starts: bool = False  # on a new install the hub starts with this provider
    key_env: str | None = None  # the variable its key is usually kept in
    note: str = ""

    @property
    def wire(self) -> str:
        """The provider's own wire: the first it serves (used by ``models test``)."""
        return next(iter(self.wires))

    def public(self) -> dict:
        return {
            "id": self.id, "name": self.name, "wires": dict(self.wires), "endpoint": self.wires[self.wire],
            "auth": self.auth, "models": list(self.models), "contributor_models": list(self.contributor_models),
            "local": self.local, "starts": self.starts, "key_env": self.key_env, "note": self.note,
        }



_PRESETS: tuple[Preset, ...] = (
    Preset("anthropic", "Anthropic", {ANTHROPIC: "https://api.anthropic.com"}, "x-api-key",
           ("claude-opus-5-5", "claude-haiku-5-5", "claude-opus-5", "claude-opus-4-7"), starts=True,
           key_env="ANTHROPIC_API_KEY"),
    Preset("openai", "OpenAI", {OPENAI: "https://api.openai.com/v1"}, "bearer",
           ("gpt-6-astra", "gpt-6-luna", "gpt-6-sol", "gpt-4o"), starts=True, key_env="OPENAI_API_KEY"),
    Preset("gemini", "Google Gemini", {GEMINI: "https://generativelanguage.googleapis.com",
                                       OPENAI: "https://generativelanguage.googleapis.com/v1beta/openai"},
           "x-goog-api-key", ("gemini-3.5-flash-lite", "gemini-3.1-pro-preview", "gemini-2.5-flash", "gemini-2.5-pro"),
           starts=True, key_env="GEMINI_API_KEY"),
    Preset("deepseek", "DeepSeek", {OPENAI: "https://api.deepseek.com/v1", ANTHROPIC: "https://api.deepseek.com/anthropic"},
           "bearer", ("deepseek-flash", "deepseek-v4-pro", "deepseek-chat", "deepseek-reasoner"), starts=True,
           key_env="DEEPSEEK_API_KEY"),
    Preset("openrouter", "OpenRouter", {OPENAI: "https://openrouter.ai/api/v1"}, "bearer", (), starts=True,
           key_env="OPENROUTER_API_KEY", note="models are named as OpenRouter names them, e.g. anthropic/claude-opus-5-5"),
    Preset("meta", "Meta (Muse)", {OPENAI: "https://api.llama.com/compat/v1"}, "bearer", MUSE_MODELS,
           MUSE_CONTRIBUTOR_MODELS, starts=True, key_env="META_API_KEY",
           note="the contributor variants may be trained on what they are sent (allow_training_models)"),
    Preset("ollama", "Ollama (local)", {OPENAI: "http://127.0.0.1:11434/v1", ANTHROPIC: "http://127.0.0.1:11434"},
           "none", local=True),
    Preset("llama.cpp", "llama.cpp server (local)", {OPENAI: "http://127.0.0.1:8080/v1"}, "none", local=True),
    Preset("lmstudio", "LM Studio (local)", {OPENAI: "http://127.0.0.1:1234/v1"}, "none", local=True),
    Preset("vllm", "vLLM (local)", {OPENAI: "http://127.0.0.1:8000/v1"}, "bearer", local=True,
           note="vLLM takes a key only when started with --api-key"),
    Preset("mock", "Mock (answers without a model)", {ANTHROPIC: "mock:", OPENAI: "mock:", GEMINI: "mock:"}, "none",
           ("echo", "reply", "tool", "fail", "slow"), note="deterministic and scriptable; for tests and development"),
    # Other hosts: added when needed.
    Preset("azure-openai", "Azure OpenAI", {OPENAI: "https://RESOURCE.openai.azure.com/openai/v1"}, "x-api-key",
           key_env="AZURE_OPENAI_API_KEY", note="set --base-url to your resource"),
    Preset("bedrock", "AWS Bedrock", {OPENAI: "https://bedrock-runtime.us-east-1.amazonaws.com/openai/v1"}, "bearer",
           key_env="AWS_BEARER_TOKEN_BEDROCK", note="set --base-url to your region"),
    Preset("vertex", "Google Vertex AI", {OPENAI: "https://aiplatform.googleapis.com/v1beta1/projects/PROJECT/locations/global/endpoints/openapi"},
           "bearer", note="set --base-url to your project; --command 'gcloud auth print-access-token'"),
    Preset("groq", "Groq", {OPENAI: "https://api.groq.com/openai/v1"}, "bearer", key_env="GROQ_API_KEY"),
    Preset("together", "Together AI", {OPENAI: "https://api.together.xyz/v1"}, "bearer", key_env="TOGETHER_API_KEY"),
    Preset("fireworks", "Fireworks AI", {OPENAI: "https://api.fireworks.ai/inference/v1"}, "bearer",
           key_env="FIREWORKS_API_KEY"),
    Preset("perplexity", "Perplexity", {OPENAI: "https://api.perplexity.ai"}, "bearer", key_env="PERPLEXITY_API_KEY"),
    Preset("cerebras", "Cerebras", {OPENAI: "https://api.cerebras.ai/v1"}, "bearer", key_env="CEREBRAS_API_KEY"),
    Preset("nvidia-nim", "NVIDIA NIM", {OPENAI: "https://integrate.api.nvidia.com/v1"}, "bearer",
           key_env="NVIDIA_API_KEY"),
    Preset("mistral", "Mistral", {OPENAI: "https://api.mistral.ai/v1"}, "bearer", key_env="MISTRAL_API_KEY"),
    Preset("xai", "xAI", {OPENAI: "https://api.x.ai/v1"}, "bearer", key_env="XAI_API_KEY"),
)

PRESETS: dict[str, Preset] = {p.id: p for p in _PRESETS}
#: The providers a new install starts with (each with "Key missing" until a key is stored).
STARTING_PROVIDERS = tuple(p.id for p in _PRESETS if p.starts)
MOCK = "mock"


@dataclass(frozen=True)
class ProviderConfig:
    """A provider as the plaza has it: its preset, its own endpoint and where its key lives.

    ``key`` says where the key is, never what it is: {"kind": "vault"} (the
    vault entry bound to ``provider:<id>``), {"kind": "env", "name": NAME},
    {"kind": "secret", "name": NAME} (a named vault entry), {"kind": "command",
    "command": CMD} (its output is a bearer token), or {"kind": "none"}.
    """

    id: str
    preset: str
    wires: dict[str, str]
    auth: str
    models: tuple[str, ...]
    key: dict = field(default_factory=lambda: {"kind": "vault"})
    enabled: bool = True

    @classmethod
    def from_row(cls, row: dict) -> ProviderConfig:
        return cls(row["id"], row["preset"], dict(row["wires"]), row["auth"], tuple(row["models"]),
                   dict(row["key"]), bool(row.get("enabled", True)))

    @property
    def is_mock(self) -> bool:
        return self.preset == MOCK

    def endpoint(self, wire: str) -> str | None:
        return self.wires.get(wire)

    @property
    def wire(self) -> str:
        return next(iter(self.wires))



def config_from_preset(preset_id: str, *, id: str | None = None, base_url: str | None = None,
                       key: dict | None = None, models: list[str] | None = None, auth: str | None = None) -> dict:
    """A provider's settings from a preset; ``base_url`` replaces the endpoint of its own wire."""
    p = PRESETS.get(preset_id)
    if p is None:
        from ...domain.base import Refusal

        raise Refusal("no_preset", f"no preset {preset_id}; see agentplaza models presets")
    wires = dict(p.wires)
    if base_url:
        base = base_url.rstrip("/")
        if p.local:  # the server's address: the OpenAI shape under /v1, the others at its root
            root = base[:-3] if base.endswith("/v1") else base
            wires = {w: root + "/v1" if w == OPENAI else root for w in wires}
        else:  # another address for the provider's own wire; its other wires are dropped
            wires = {p.wire: base}
    default_key = {"kind": "none"} if p.auth == "none" or p.id == MOCK else {"kind": "vault"}
    return {
        "id": id or p.id, "preset": p.id, "wires": wires, "auth": auth or p.auth,
        "models": list(models if models is not None else [*p.models, *p.contributor_models]),
        "key": key or default_key, "enabled": True,
    }
