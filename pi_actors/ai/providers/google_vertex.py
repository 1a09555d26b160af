"""The ``google-vertex`` API: Gemini on Vertex AI, through the ``google-genai`` SDK with
``vertexai=True`` (the same optional extra as Gemini: ``pip install 'pi-actors[google]'``).

Contract: ``stream`` / ``stream_simple`` follow the skeleton of ``_common.run_stream`` (never
raise, exactly one terminal event). The request body, the mapping of the streamed chunks onto
blocks, usage, stop reasons, replay rules and reasoning levels are Gemini's
(``google_generative_ai``: same wire, same mapper). Specific to Vertex, as pi 0.73.1:
- auth: an API key (``options.api_key`` or ``GOOGLE_CLOUD_API_KEY``; Vertex "express mode",
  no project in the URL) wins; the catalog's ``"<authenticated>"`` marker, pi's
  ``gcp-vertex-credentials`` marker or a ``<placeholder>`` are not keys. Without a key the
  project (``extra`` ``project`` or ``GOOGLE_CLOUD_PROJECT`` / ``GCLOUD_PROJECT``) and the
  location (``extra`` ``location`` or ``GOOGLE_CLOUD_LOCATION``) are required — a missing one
  is an ``error`` event naming the variable — and the access token comes from Google's
  application default credentials (``GOOGLE_APPLICATION_CREDENTIALS`` or gcloud's file),
  loaded and refreshed by ``google-auth`` in a worker thread (the SDK would do it with
  ``asyncio.to_thread``, which does not exist on trio); the SDK then sends
  ``Authorization: Bearer <token>``. A failure to load or refresh them is one ``error`` event
  line; the credentials are kept per project/location and refreshed only once expired;
- URL: API version ``v1``; a catalog base URL with ``{location}`` is Google's default endpoint
  (the SDK builds ``https://<location>-aiplatform.googleapis.com``); another base URL is used
  as given, and when it names a version (``.../v1``) no version is added (pi's rule). The
  request path is ``projects/P/locations/L/publishers/google/models/M:streamGenerateContent``
  (with a project) or ``publishers/google/models/M:streamGenerateContent`` (with a key);
- cancellation, retries off, TLS, client reuse: as ``google_generative_ai``.
"""

from __future__ import annotations

import os
import re
from typing import Any

import trio

try:
    from google import genai

    from ._genai import GenaiHandle, stream_content
except ImportError as exc:  # pragma: no cover - exercised in a process without the extra
    raise ImportError(
        f"The google-vertex API needs the google-genai SDK ({exc.name or exc} is missing): "
        "pip install 'pi-actors[google]'"
    ) from None

from ..options import StreamOptions, build_base_options, clamp_reasoning, extra_option
from ..types import AssistantMessage, Context, Model
from . import google_generative_ai as gemini
from ._common import ProviderError, StreamRun, apply_on_payload, run_stream
from ._stream import headers_key, warm_model, warm_up_functions

__all__ = ["API", "stream", "stream_simple", "resolve_api_key", "resolve_project", "resolve_location",
           "prepare", "warm_up"]

API = "google-vertex"
API_VERSION = "v1"
_NOT_KEYS = ("gcp-vertex-credentials", "<authenticated>")
_VERSION_PART = re.compile(r"^v\d+(?:beta\d*)?$")


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def resolve_api_key(options: StreamOptions) -> str | None:
    """The Vertex API key to use, or None to use a project and application default credentials."""
    key = (options.api_key or "").strip() or _env("GOOGLE_CLOUD_API_KEY")
    if not key or key in _NOT_KEYS or re.fullmatch(r"<[^>]+>", key):
        return None
    return key


def resolve_project(options: StreamOptions) -> str:
    """The Google Cloud project; raises ``ProviderError`` naming the variables when unset."""
    project = extra_option(options, "project") or _env("GOOGLE_CLOUD_PROJECT") or _env("GCLOUD_PROJECT")
    if not project:
        raise ProviderError("Vertex AI requires a project ID. Set GOOGLE_CLOUD_PROJECT/GCLOUD_PROJECT "
                            "or pass project in options.")
    return str(project)


def resolve_location(options: StreamOptions) -> str:
    """The Vertex AI location (region); raises ``ProviderError`` naming the variable when unset."""
    location = extra_option(options, "location") or _env("GOOGLE_CLOUD_LOCATION")
    if not location:
        raise ProviderError("Vertex AI requires a location. Set GOOGLE_CLOUD_LOCATION or pass location in options.")
    return str(location)


def _custom_base_url(base_url: str) -> str | None:
    trimmed = (base_url or "").strip()
    return None if not trimmed or "{location}" in trimmed else trimmed.rstrip("/")


def _load_credentials() -> Any:
    """Application default credentials with a fresh token (blocking: run in a worker thread)."""
    import google.auth
    import google.auth.transport.requests

    credentials, _project = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    credentials.refresh(google.auth.transport.requests.Request())
    return credentials


def _client_handle(model: Model, options: StreamOptions, api_key: str | None,
                   project: str | None, location: str | None, credentials: Any) -> GenaiHandle:
    """A Vertex genai client on HTTP clients of ours (``_genai.GenaiHandle``)."""
    http: dict[str, Any] = {"api_version": API_VERSION}
    base = _custom_base_url(model.base_url)
    if base:
        http["base_url"] = base
        if any(_VERSION_PART.match(p) for p in base.split("/")):
            http["api_version"] = ""

    def make(http_options: Any) -> genai.Client:
        if api_key:
            return genai.Client(vertexai=True, api_key=api_key, http_options=http_options)
        return genai.Client(vertexai=True, project=project, location=location,
                            credentials=credentials, http_options=http_options)

    return GenaiHandle(model, options, make, **http)


def _warm_client() -> GenaiHandle:
    handle = _client_handle(warm_model(API, "http://127.0.0.1/v1"), StreamOptions(), "warm-up", None, None, None)
    handle.client.aio.models  # noqa: B018 - builds the async resource
    return handle


prepare, warm_up = warm_up_functions(_warm_client)


_credentials_cache: dict[tuple[str, str], Any] = {}


async def _credentials(project: str, location: str) -> Any:
    """Cached application default credentials, refreshed in a thread when expired."""
    key = (project, location)
    cached = _credentials_cache.get(key)
    if cached is not None and cached.token and not cached.expired:
        return cached
    try:
        credentials = await trio.to_thread.run_sync(_load_credentials, abandon_on_cancel=True)
    except Exception as exc:
        raise ProviderError(f"Vertex AI application default credentials failed: {type(exc).__name__}: "
                            f"{str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")) from exc
    _credentials_cache[key] = credentials
    return credentials


async def _body(run: StreamRun, context: Context) -> None:
    model, options = run.model, run.options
    api_key = resolve_api_key(options)
    project = location = None
    credentials: Any = None
    if not api_key:
        project, location = resolve_project(options), resolve_location(options)
        credentials = await _credentials(project, location)
    params = await apply_on_payload(gemini.build_params(model, context, options), model, options)
    key = (API, api_key, project, location, id(credentials), model.base_url, headers_key(model, options))
    factory = lambda: _client_handle(model, options, api_key, project, location, credentials)  # noqa: E731
    await stream_content(run, key, factory, params, gemini._Mapper(run))


async def stream(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    return await run_stream(model, options, emit, lambda run: _body(run, context), gemini.describe_google_error)


async def stream_simple(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    """pi's reasoning mapping for Vertex (Gemini 3 Pro/Flash: ``thinkingLevel``; others: a
    budget from pi's table; no level: thinking off), sent to :func:`stream`."""
    base = build_base_options(model, options, options.api_key if options else None)
    level = clamp_reasoning(options.reasoning if options else None)
    base.extra["thinking_enabled"] = bool(level)
    if level:
        if gemini._is_gemini3_pro(model) or gemini._is_gemini3_flash(model):
            base.extra["thinking_level"] = gemini._thinking_level(level, model)
        else:
            budgets = options.thinking_budgets if options else None
            base.extra["thinking_budget_tokens"] = gemini._thinking_budget(model, level, budgets)
    return await stream(model, context, base, emit)
