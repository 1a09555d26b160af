"""The runtime configuration: what the CLI (or a server) hands to each actor process.

One :class:`RuntimeConfig` holds a part per actor — :class:`ProviderConfig`,
:class:`ToolPoolConfig`, :class:`StoreConfig`, :class:`CoordinatorConfig` — and the
coordinator's part carries the user's :class:`Settings` (``settings.json``, pi's format, with
typed sub-Structs). Every part crosses a process boundary as its dict form
(``msgspec.to_builtins``; camelCase keys, defaults left out) and is read back on the other
side with :func:`read_part`, so readers use attributes, never ``.get(...)`` chains.

The wire form is the one the actors have always read. Five provider/tool-pool keys predate
the camelCase rule and keep their snake_case names (``runtime_api_keys``,
``api_key_sources``, ``warm_api``, ``max_workers``, ``warm_on_request``).

Settings sections whose defaults live with the code that uses them (compaction, retry,
supervision) declare their fields optional: ``None`` means "not set, use that code's default"
and :func:`set_fields` gives only the fields that were set, as keyword arguments for the
settings class of that code (``CompactionSettings``, ``RetrySettings``, ``RestartPolicy``).

Schema evolution (as for every protocol Struct): a new field gets a default; nothing changes
type; unknown keys are ignored (settings files written for pi carry keys we do not use) —
except in ``sandbox``, where an unknown key is an error: a misspelt limit must not silently
leave a tool unconfined.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import msgspec

from ..ai.options import DEFAULT_FIRST_BYTE_TIMEOUT_MS, DEFAULT_IDLE_TIMEOUT_MS
from ..ai.retry_after import DEFAULT_MAX_RETRY_DELAY_MS
from ..ai.types import Model
from ..choices import QueueMode, SandboxMode, ThinkingChoice, ToolExecutionMode
from ..runtime import WireStruct
from .extension_host import ExtensionHostConfig

__all__ = [
    "ThinkingLevelName",
    "NonNegative",
    "Positive",
    "CompactionSection",
    "RetrySection",
    "SupervisionSection",
    "ProviderSection",
    "SandboxSection",
    "Settings",
    "StreamLimits",
    "ProviderConfig",
    "ScopedModel",
    "SkillConfig",
    "PromptTemplateConfig",
    "ResourcesConfig",
    "LimitsConfig",
    "SandboxConfig",
    "ToolPoolConfig",
    "StoreConfig",
    "SessionConfig",
    "ExportsConfig",
    "CoordinatorConfig",
    "RuntimeConfig",
    "read_part",
    "set_fields",
    "settings_error",
]

#: A thinking level as settings and the coordinator take it (``pi_actors.choices``).
ThinkingLevelName = ThinkingChoice
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Positive = Annotated[float, msgspec.Meta(gt=0)]
Milliseconds = Annotated[float, msgspec.Meta(ge=0)]
PositiveCount = Annotated[int, msgspec.Meta(gt=0)]

# -- settings.json --------------------------------------------------------------------------


class CompactionSection(WireStruct):
    """``compaction``: pi's automatic context compaction (defaults: ``CompactionSettings``)."""

    enabled: bool | None = None
    reserve_tokens: NonNegative | None = None
    keep_recent_tokens: NonNegative | None = None


class RetrySection(WireStruct):
    """``retry``: automatic retry of transient provider errors (defaults: ``RetrySettings``).
    ``maxDelayMs`` is also the longest ``Retry-After`` the provider actor will wait for."""

    enabled: bool | None = None
    max_retries: NonNegative | None = None
    base_delay_ms: NonNegative | None = None
    max_delay_ms: NonNegative | None = None
    provider: RetryProviderSection | None = None


class RetryProviderSection(WireStruct):
    """``retry.provider`` (pi's): the SDK's own request timeout and retries, and the longest
    server-requested delay (``Retry-After``) waited for before the request fails (ms, 0 = no
    cap; it wins over ``retry.maxDelayMs``). ``timeoutMs`` / ``maxRetries`` go to the SDK
    client of the SDK-based APIs (``StreamLimits``)."""

    timeout_ms: NonNegative | None = None
    max_retries: NonNegative | None = None
    max_retry_delay_ms: NonNegative | None = None


class ThinkingBudgetsSection(WireStruct):
    """``thinkingBudgets``: thinking tokens per level for token-budget APIs (pi's defaults
    otherwise: ``ai.options.DEFAULT_THINKING_BUDGETS``)."""

    minimal: NonNegative | None = None
    low: NonNegative | None = None
    medium: NonNegative | None = None
    high: NonNegative | None = None


class SupervisionSection(WireStruct):
    """``supervision``: restart intensity and liveness of the actors (defaults:
    ``RestartPolicy``; every number must be above 0)."""

    max_restarts: PositiveCount | None = None
    window: Positive | None = msgspec.field(default=None, name="restartWindow")
    backoff_first: Positive | None = None
    backoff_max: Positive | None = None
    heartbeat_interval: Positive | None = None
    heartbeat_timeout: Positive | None = None
    start_timeout: Positive | None = None
    spares: bool | None = None


class ProviderSection(WireStruct):
    """``provider`` (ours, not pi's): how long a stream may go without data before its
    response headers / between two reads of its body, in ms (0 = no limit)."""

    first_byte_timeout_ms: Milliseconds = DEFAULT_FIRST_BYTE_TIMEOUT_MS
    idle_timeout_ms: Milliseconds = DEFAULT_IDLE_TIMEOUT_MS


class SandboxSection(WireStruct, forbid_unknown_fields=True):
    """``sandbox`` (global settings file only): limits as bytes or sizes such as ``"512M"``
    (checked by ``SandboxPolicy.from_settings``), ``processes``, ``homeAllow``."""

    memory: int | str | None = None
    tmp_size: int | str | None = None
    shm_size: int | str | None = None
    file_size: int | str | None = None
    processes: int | None = None
    home_allow: list[str] | None = None


class ImagesSection(WireStruct):
    """``images`` (pi's): ``autoResize`` brings images ``read`` returns within 2000x2000 and
    4.5 MiB; ``blockImages`` sends no image to the model (each becomes pi's "Image reading is
    disabled." text)."""

    auto_resize: bool = True
    block_images: bool = False


class Settings(WireStruct):
    """The effective ``settings.json`` (global file, then the project's, merged one level
    deep). Keys pi knows and we do not use are ignored."""

    default_provider: str | None = None
    default_model: str | None = None
    default_thinking_level: ThinkingLevelName | None = None
    steering_mode: QueueMode = "one-at-a-time"
    follow_up_mode: QueueMode = "one-at-a-time"
    tool_execution: ToolExecutionMode = "parallel"
    compaction: CompactionSection = msgspec.field(default_factory=CompactionSection)
    retry: RetrySection = msgspec.field(default_factory=RetrySection)
    supervision: SupervisionSection = msgspec.field(default_factory=SupervisionSection)
    provider: ProviderSection = msgspec.field(default_factory=ProviderSection)
    sandbox: SandboxSection = msgspec.field(default_factory=SandboxSection)
    images: ImagesSection = msgspec.field(default_factory=ImagesSection)
    #: pi's: tokens per thinking level; the session directory (``--session-dir`` wins);
    #: thinking blocks hidden in the TUI; the bash tool's
    #: shell and a prefix run before each command; what Esc Esc on an empty editor does in the
    #: TUI (default "tree"). Typed here so that a wrong type is refused naming the key;
    #: ``shellPath`` and ``shellCommandPrefix`` are not applied yet.
    thinking_budgets: ThinkingBudgetsSection | None = None
    session_dir: str | None = None
    hide_thinking_block: bool | None = None
    shell_path: str | None = None
    shell_command_prefix: str | None = None
    double_escape_action: Literal["tree", "fork", "none"] | None = None


# -- the actors' parts ----------------------------------------------------------------------


class StreamLimits(WireStruct):
    """The limits every provider stream gets, in ms (0 = none)."""

    first_byte_timeout_ms: Milliseconds = DEFAULT_FIRST_BYTE_TIMEOUT_MS
    idle_timeout_ms: Milliseconds = DEFAULT_IDLE_TIMEOUT_MS
    max_retry_delay_ms: Milliseconds = DEFAULT_MAX_RETRY_DELAY_MS
    #: pi's ``retry.provider.timeoutMs`` / ``.maxRetries``: the SDK client's request timeout
    #: and its own retries (``ai.options.sdk_client_options``); None: not set.
    timeout_ms: NonNegative | None = None
    max_retries: NonNegative | None = None


class ProviderConfig(WireStruct):
    """The provider streamer. ``runtime_api_keys``: keys given on the command line, by
    provider; ``api_key_sources``: models.json's raw ``apiKey`` values (a literal, an
    environment variable's name or ``!command``), resolved on first use; ``warm_api``: the API
    whose SDK is imported and warmed up at start; ``standby``: a supervisor's warm spare."""

    runtime_api_keys: dict[str, str] = msgspec.field(default_factory=dict, name="runtime_api_keys")
    api_key_sources: dict[str, str] = msgspec.field(default_factory=dict, name="api_key_sources")
    warm_api: str | None = msgspec.field(default=None, name="warm_api")
    log_file: str | None = None
    limits: StreamLimits = msgspec.field(default_factory=StreamLimits)
    standby: bool = False


class LimitsConfig(WireStruct):
    """A sandbox's resource limits (``Limits.to_config``); absent ones take the defaults."""

    processes: int | None = None
    file_size: int | None = None
    memory: int | None = None
    tmp_size: int | None = None
    shm_size: int | None = None


class SandboxConfig(WireStruct):
    """A tool sandbox policy (``SandboxPolicy.to_config``); ``mode`` None is the platform
    default, ``home_allow`` None the default allow-list."""

    mode: SandboxMode | None = None
    workspace: str = ""
    allow_network: bool = False
    hidden: list[str] = msgspec.field(default_factory=list)
    limits: LimitsConfig | None = None
    home: str | None = None
    home_allow: list[str] | None = None
    read_only: list[str] = msgspec.field(default_factory=list)


class ToolPoolConfig(WireStruct):
    """The tool pool: at most ``max_workers`` workers, ``warm`` started ahead (at start, or
    at the coordinator's first ``warm`` request with ``warm_on_request``); ``sandbox`` None is
    the platform's default policy; ``standby``: a supervisor's warm spare."""

    max_workers: Annotated[int, msgspec.Meta(ge=1)] = msgspec.field(default=32, name="max_workers")
    warm: NonNegative = 2
    warm_on_request: bool = msgspec.field(default=False, name="warm_on_request")
    sandbox: SandboxConfig | None = None
    log_file: str | None = None
    standby: bool = False


class StoreConfig(WireStruct):
    """The session store. ``owner_pid``: the process its session locks name as their owner
    (default: the process that started the store). ``root``: a workspace root the session
    files' headers keep ``cwd`` and ``parentSession`` relative to when inside it (a server's
    ``--root``; None: absolute, as pi writes them)."""

    log_file: str | None = None
    owner_pid: int | None = None
    root: str | None = None


class SessionConfig(WireStruct):
    """Which session the coordinator opens: a new one in ``session_dir`` (none saved with
    ``no_session``), ``resume`` a file, or ``fork_from`` a file into a new one."""

    no_session: bool = False
    session_dir: str | None = None
    agent_dir: str | None = None
    resume: str | None = None
    fork_from: str | None = None


class ExportsConfig(WireStruct):
    """Where ``export_html`` writes. By default a caller's ``outputPath``, else ``dir``, else
    the session's cwd (pi's place). ``caller_path`` False (a served session) refuses an
    ``outputPath`` and writes only in ``dir`` — none if ``dir`` is None."""

    dir: str | None = None
    caller_path: bool = True


class SkillConfig(WireStruct):
    """One skill the session knows (``pi_actors.coding.resources.Skill``'s fields)."""

    name: str
    description: str
    path: str
    base_dir: str = ""
    scope: str = "user"
    source: str = "auto"
    disable_model_invocation: bool = False


class PromptTemplateConfig(WireStruct):
    """One prompt template (``pi_actors.coding.resources.PromptTemplate``'s fields)."""

    name: str
    description: str = ""
    content: str = ""
    path: str = ""
    scope: str = "user"
    source: str = "auto"
    argument_hint: str | None = None


class ResourcesConfig(WireStruct):
    """The skills and prompt templates the CLI found for the session, in precedence order:
    the coordinator expands ``/skill:name`` and ``/template`` with them and lists them."""

    skills: list[SkillConfig] = msgspec.field(default_factory=list)
    templates: list[PromptTemplateConfig] = msgspec.field(default_factory=list)


class ScopedModel(WireStruct):
    """One model in scope for Ctrl+P / RPC ``cycle_model`` (``--models`` / ``enabledModels``,
    resolved by ``cli.model_scope``); ``thinking_level``: the pattern's ``:level``, None to keep
    the session's level on switching to it."""

    provider: str
    model_id: str
    thinking_level: ThinkingChoice | None = None


class CoordinatorConfig(WireStruct):
    """The loop coordinator. ``models``: the models a session may switch to; ``relink``: the
    links a supervisor re-links after a restart (set by the placement, not by users)."""

    model: Model
    cwd: str = ""
    thinking_level: ThinkingLevelName = "off"
    system_prompt: str = ""
    tools: list[str] = msgspec.field(default_factory=list)
    session: SessionConfig = msgspec.field(default_factory=SessionConfig)
    settings: Settings = msgspec.field(default_factory=Settings)
    log_file: str | None = None
    models: list[Model] = msgspec.field(default_factory=list)
    exports: ExportsConfig = msgspec.field(default_factory=ExportsConfig)
    relink: list[str] = msgspec.field(default_factory=list)
    #: The extension host's part (set by the placement from ``RuntimeConfig.extensions``).
    extensions: ExtensionHostConfig | None = None
    resources: ResourcesConfig = msgspec.field(default_factory=ResourcesConfig)
    #: The scoped models (``--models``, else settings ``enabledModels``) the front ends cycle
    #: among; empty: every model with credentials. Read by the TUI and the RPC mode.
    scoped_models: list[ScopedModel] = msgspec.field(default_factory=list)
    #: How many tool calls of one reply the tool pool serves from its warm workers, which it
    #: keeps ready in the session's cwd (set by the placement from the pool's ``warm`` when the
    #: pool is its own; 0: the pool is told of every call as it streams, ``expect_calls``).
    warm_tools: NonNegative = msgspec.field(default=0, name="warm_tools")


class RuntimeConfig(WireStruct):
    """Everything one session's actors are started with (see the module docstring)."""

    coordinator: CoordinatorConfig
    provider: ProviderConfig = msgspec.field(default_factory=ProviderConfig)
    tools: ToolPoolConfig = msgspec.field(default_factory=ToolPoolConfig)
    store: StoreConfig = msgspec.field(default_factory=StoreConfig)
    #: The extension host's part; None (or no specs): no extension host is started.
    extensions: ExtensionHostConfig | None = None


# -- helpers ----------------------------------------------------------------------------------

P = TypeVar("P", bound=msgspec.Struct)


def read_part(doc: Any, kind: type[P]) -> P:
    """``doc`` (an actor's configuration as it arrived: a dict, None, or already a ``kind``)
    as a ``kind``. Raises ``ValueError`` with one line naming the bad key
    (``bad actor configuration: Expected `int`, got `str` - at `$.warm```)."""
    if isinstance(doc, kind):
        return doc
    try:
        return msgspec.convert({} if doc is None else doc, kind)
    except msgspec.ValidationError as exc:
        raise ValueError(f"bad {kind.__name__} configuration: {exc}") from None


def set_fields(section: msgspec.Struct) -> dict[str, Any]:
    """The fields of a settings section that were set (not None), by Python name: keyword
    arguments for the settings class whose defaults fill the rest."""
    return {name: value for name, value in msgspec.structs.asdict(section).items() if value is not None}


def settings_error(exc: msgspec.ValidationError, where: str) -> str:
    """One line for a settings file that does not fit :class:`Settings`, naming the key:
    ``settings.json (/x/settings.json): retry.maxRetries: Expected `int`, got `str```."""
    text = str(exc).replace("\n", "\\n")  # a key may hold a newline: still one line
    message, sep, path = text.rpartition(" - at `$.")
    if not sep:
        return f"{where}: {text}"
    key = path.rstrip("`")
    return f"{where}: {key}: {message}"
