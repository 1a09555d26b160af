"""pi_actors.ai — the stateless LLM layer: (Model, Context, Options) -> the 12 stream events.

Importing this package is cheap: it never imports the ``anthropic`` or ``openai`` SDKs; the
provider modules load on first use (see ``registry``).
"""

from .abort import AbortedError, AbortSignal
from .catalog import (
    CatalogError,
    builtin_models,
    calculate_cost,
    find_model,
    get_model,
    get_models,
    get_providers,
    models_are_equal,
    unknown_model_message,
    unsupported_api_message,
)
from .env_keys import credential_hint, get_env_api_key
from .models_json import ModelsJson, load_models_json, merge_models, read_models_json, resolve_config_value
from .options import (
    DEFAULT_THINKING_BUDGETS,
    CacheRetention,
    Emit,
    StreamFunction,
    StreamOptions,
    adjust_max_tokens_for_thinking,
    build_base_options,
    clamp_reasoning,
    clamp_thinking_level,
    supported_thinking_levels,
    supports_xhigh,
)
from .overflow import get_overflow_patterns, is_context_overflow
from .partial_json import parse_streaming_json, parse_tool_arguments
from .registry import (
    ApiProvider,
    clear_api_providers,
    get_api_provider,
    get_api_providers,
    register_api_provider,
    reset_api_providers,
    unregister_api_providers,
)
from .sanitize import sanitize_surrogates
from .stream import complete, complete_simple, stream, stream_simple
from .transform import transform_messages
from .types import *  # noqa: F401,F403  (the Structs; their own __all__)
from .types import __all__ as _types_all

__all__ = [
    *_types_all,
    "AbortSignal",
    "AbortedError",
    "StreamOptions",
    "Emit",
    "StreamFunction",
    "CacheRetention",
    "DEFAULT_THINKING_BUDGETS",
    "stream",
    "stream_simple",
    "complete",
    "complete_simple",
    "ApiProvider",
    "register_api_provider",
    "get_api_provider",
    "get_api_providers",
    "unregister_api_providers",
    "clear_api_providers",
    "reset_api_providers",
    "get_env_api_key",
    "credential_hint",
    "parse_streaming_json",
    "parse_tool_arguments",
    "sanitize_surrogates",
    "calculate_cost",
    "get_model",
    "get_models",
    "get_providers",
    "builtin_models",
    "find_model",
    "unknown_model_message",
    "unsupported_api_message",
    "CatalogError",
    "models_are_equal",
    "is_context_overflow",
    "get_overflow_patterns",
    "supports_xhigh",
    "supported_thinking_levels",
    "clamp_thinking_level",
    "build_base_options",
    "clamp_reasoning",
    "adjust_max_tokens_for_thinking",
    "ModelsJson",
    "load_models_json",
    "read_models_json",
    "merge_models",
    "resolve_config_value",
    "transform_messages",
]
