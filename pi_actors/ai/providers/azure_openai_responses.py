"""The ``azure-openai-responses`` API: the Responses endpoint of an Azure OpenAI resource,
through the ``openai`` SDK's ``AsyncAzureOpenAI`` client (no extra: the SDK is a dependency).

Contract: ``stream`` / ``stream_simple`` follow the skeleton of ``_common.run_stream`` (never
raise, exactly one terminal event). The stream is the Responses API's: it is mapped by
``openai_responses``'s mapper (same blocks, signatures, usage, stop reasons and errors). What
differs, as pi has it:
- where: the base URL is ``extra["azure_base_url"]``, else ``AZURE_OPENAI_BASE_URL``, else
  ``https://<AZURE_OPENAI_RESOURCE_NAME>.openai.azure.com/openai/v1``, else ``model.base_url``;
  an Azure host whose path is empty or ``/openai`` gets ``/openai/v1``. None of them: an error
  saying which to set. The API version is ``extra["azure_api_version"]``, else
  ``AZURE_OPENAI_API_VERSION``, else ``v1`` (sent as ``?api-version=``); the key goes in the
  ``api-key`` header (the SDK's Azure client);
- which deployment: ``extra["azure_deployment_name"]``, else the model's entry in
  ``AZURE_OPENAI_DEPLOYMENT_NAME_MAP`` (``model=deployment,...``), else the model id — sent as
  the request's ``model``;
- the body: ``prompt_cache_key`` is the session id; a reasoning model asked for no reasoning
  gets ``reasoning: {"effort": "none"}`` (where openai-responses sends its "Juice: 0" message);
  tool-call ids of the OpenAI family are normalized as for OpenAI.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import openai

from ..env_keys import get_env_api_key
from ..options import StreamOptions, extra_option, with_sdk_client_options
from ..types import AssistantMessage, Context, Model
from ._common import (
    ProviderError,
    StreamRun,
    apply_on_payload,
    describe_error,
    run_stream,
    sdk_client,
    sdk_request_args,
    shared_ssl_context,
)
from ._one_write import send_requests_whole
from ._stream import (
    headers_key,
    open_sdk,
    read_response,
    request_headers,
    sse_reader,
    stream_simple_with_effort,
    warm_model,
    warm_up_functions,
)
from .openai_responses import _Mapper, convert_messages

__all__ = ["API", "stream", "stream_simple", "build_params", "resolve_azure", "deployment_name", "prepare",
           "warm_up"]

API = "azure-openai-responses"

DEFAULT_API_VERSION = "v1"
_AZURE_HOSTS = (".openai.azure.com", ".cognitiveservices.azure.com")
_NO_BASE_URL = ("Azure OpenAI base URL is required. Set AZURE_OPENAI_BASE_URL or AZURE_OPENAI_RESOURCE_NAME, "
                "or pass azureBaseUrl, azureResourceName, or model.baseUrl.")
_NO_KEY = "Azure OpenAI API key is required. Set AZURE_OPENAI_API_KEY environment variable or pass it as an argument."


def deployment_name(model: Model, options: StreamOptions | None) -> str:
    """The deployment the request names (see the module docstring)."""
    given = extra_option(options, "azure_deployment_name")
    if isinstance(given, str) and given:
        return given
    for entry in (os.environ.get("AZURE_OPENAI_DEPLOYMENT_NAME_MAP") or "").split(","):
        model_id, sep, deployment = entry.strip().partition("=")
        if sep and model_id.strip() == model.id and deployment.strip():
            return deployment.strip()
    return model.id


def _normalize_base_url(base_url: str) -> str:
    trimmed = base_url.strip().rstrip("/")
    parts = urlsplit(trimmed)
    if not parts.scheme or not parts.netloc:
        raise ProviderError(f"Invalid Azure OpenAI base URL: {base_url}")
    path = parts.path.rstrip("/")
    if (parts.hostname or "").endswith(_AZURE_HOSTS) and path in ("", "/openai"):
        return urlunsplit((parts.scheme, parts.netloc, "/openai/v1", "", ""))
    return trimmed


def resolve_azure(model: Model, options: StreamOptions | None) -> tuple[str, str]:
    """``(base_url, api_version)`` for a call; ProviderError when no base URL is configured."""
    version = extra_option(options, "azure_api_version") or os.environ.get("AZURE_OPENAI_API_VERSION") \
        or DEFAULT_API_VERSION
    base = (extra_option(options, "azure_base_url") or os.environ.get("AZURE_OPENAI_BASE_URL") or "").strip()
    if not base:
        resource = extra_option(options, "azure_resource_name") or os.environ.get("AZURE_OPENAI_RESOURCE_NAME")
        if resource:
            base = f"https://{resource}.openai.azure.com/openai/v1"
    base = base or model.base_url
    if not base:
        raise ProviderError(_NO_BASE_URL)
    return _normalize_base_url(base), str(version)


def build_params(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    params: dict[str, Any] = {"model": deployment_name(model, options), "input": convert_messages(model, context),
                              "stream": True}
    if options.session_id:
        params["prompt_cache_key"] = options.session_id
    if options.max_tokens:
        params["max_output_tokens"] = options.max_tokens
    if options.temperature is not None:
        params["temperature"] = options.temperature
    if context.tools:
        params["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                            "parameters": t.parameters, "strict": False} for t in context.tools]
    if model.reasoning:
        effort = extra_option(options, "reasoning_effort")
        summary = extra_option(options, "reasoning_summary")
        if effort or summary:
            params["reasoning"] = {"effort": effort or "medium", "summary": summary or "auto"}
            params["include"] = ["reasoning.encrypted_content"]
        else:
            params["reasoning"] = {"effort": "none"}
    return params


def _make_client(model: Model, options: StreamOptions, api_key: str, base_url: str, version: str) -> Any:
    headers = request_headers(model, options)
    return openai.AsyncAzureOpenAI(api_key=api_key, api_version=version, base_url=base_url, max_retries=0,
                                   default_headers=headers or None,
                                   http_client=send_requests_whole(openai.DefaultAsyncHttpxClient(verify=shared_ssl_context())))


def _warm_client() -> Any:
    """A throwaway client with the resource the provider calls touched (imports it)."""
    model = warm_model(API, "http://127.0.0.1/openai/v1")
    client = _make_client(model, StreamOptions(), "warm-up", model.base_url, DEFAULT_API_VERSION)
    client.responses.with_streaming_response  # noqa: B018 - imports the resource
    return client


prepare, warm_up = warm_up_functions(_warm_client)


async def _body(run: StreamRun, context: Context) -> None:
    model, options = run.model, run.options
    api_key = options.api_key or get_env_api_key(model.provider) or os.environ.get("AZURE_OPENAI_API_KEY")
    if not api_key:
        raise ProviderError(_NO_KEY)
    base_url, version = resolve_azure(model, options)
    params = await apply_on_payload(build_params(model, context, options), model, options)
    key = (API, api_key, base_url, version, headers_key(model, options))
    async with sdk_client(key, lambda: _make_client(model, options, api_key, base_url, version)) as client:
        client = with_sdk_client_options(client, options)  # retry.provider.{timeoutMs,maxRetries}
        manager = client.responses.with_streaming_response.create(**sdk_request_args(params, "input"))
        mapper = _Mapper(run, None)
        await read_response(run, open_sdk(run, manager), sse_reader(run, mapper.sse, mapper.check_completed, mapper))


async def stream(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    return await run_stream(model, options, emit, lambda run: _body(run, context), describe_error)


async def stream_simple(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    return await stream_simple_with_effort(stream, model, context, options, emit)
