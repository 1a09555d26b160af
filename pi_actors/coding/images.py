"""Images attached to prompts and returned by ``read``: detection, decoding, pi's size limits.

pi 0.73 sends an image to the model only within 2000x2000 pixels and under 4.5 MiB of base64
(headroom below Anthropic's 5 MB); :func:`resize_image` brings an image within those limits
as pi's ``resizeImage`` does (EXIF orientation applied, Lanczos resampling, the smaller of
PNG and JPEG q80, then lower JPEG qualities, then 75 % steps down to 1x1). An image already
within the limits is returned byte for byte.

- :func:`detect_image_mime`: the MIME type of a supported image (JPEG, PNG, GIF, WebP) from
  its first bytes; the file name does not matter.
- :func:`resize_image`: ``ResizedImage``, or None when no encoding fits (pi's "could not be
  resized below the inline image size limit"); raises :class:`ImageDecodeError` for bytes
  that are not a decodable image (a truncated or corrupt file), never a Pillow exception.
- :func:`dimension_note`: pi's ``[Image: original WxH, displayed at wxh. ...]`` for a
  resized image, so the model can map coordinates back.

Pillow is imported on first use only (it stays off the start-up path of a run without
images). Resizing is CPU-bound: callers run it in a worker thread.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import Any

__all__ = [
    "IMAGES_BLOCKED",
    "IMAGE_MIME_TYPES",
    "MAX_BASE64_BYTES",
    "MAX_HEIGHT",
    "MAX_WIDTH",
    "OMITTED_TOO_LARGE",
    "ImageDecodeError",
    "ResizedImage",
    "block_images",
    "detect_image_mime",
    "dimension_note",
    "resize_image",
]

MAX_WIDTH = 2000
MAX_HEIGHT = 2000
#: Bytes of base64 an image may take (pi's ``DEFAULT_MAX_BYTES``).
MAX_BASE64_BYTES = int(4.5 * 1024 * 1024)
_JPEG_QUALITIES = (80, 85, 70, 55, 40)
IMAGE_MIME_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
#: pi's text where an image could not be brought under the limits.
OMITTED_TOO_LARGE = "[Image omitted: could not be resized below the inline image size limit.]"


class ImageDecodeError(ValueError):
    """Bytes that claim to be an image but cannot be decoded; ``str()`` says why, one line."""


@dataclass(frozen=True)
class ResizedImage:
    """An image ready to send: base64 ``data`` and its ``mime_type``, with the original and
    the sent dimensions (``was_resized``: False when the input was returned unchanged)."""

    data: str
    mime_type: str
    original_width: int
    original_height: int
    width: int
    height: int
    was_resized: bool


def detect_image_mime(head: bytes) -> str | None:
    """The MIME type of a supported image from its first bytes, or None."""
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _decode(raw: bytes) -> Any:
    """The decoded Pillow image with its EXIF orientation applied; ImageDecodeError if the
    bytes are not a complete image Pillow can read."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(raw))
        image.load()
        return ImageOps.exif_transpose(image)
    except UnidentifiedImageError:
        raise ImageDecodeError("the image cannot be decoded (corrupt or unsupported data)") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise ImageDecodeError(f"the image cannot be decoded ({exc})") from None


def _encode(image: Any, fmt: str, **options: Any) -> str:
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return base64.b64encode(out.getvalue()).decode("ascii")


def resize_image(
    raw: bytes,
    mime_type: str,
    *,
    max_width: int = MAX_WIDTH,
    max_height: int = MAX_HEIGHT,
    max_bytes: int = MAX_BASE64_BYTES,
) -> ResizedImage | None:
    """``raw`` (an image of ``mime_type``) within ``max_width`` x ``max_height`` and under
    ``max_bytes`` of base64; None if even 1x1 does not fit. Raises ImageDecodeError."""
    from PIL import Image

    image = _decode(raw)
    width, height = image.size
    data = base64.b64encode(raw).decode("ascii")
    if width <= max_width and height <= max_height and len(data) < max_bytes:
        return ResizedImage(data, mime_type, width, height, width, height, False)
    target_w, target_h = width, height
    if target_w > max_width:
        target_h, target_w = round(target_h * max_width / target_w), max_width
    if target_h > max_height:
        target_w, target_h = round(target_w * max_height / target_h), max_height
    target_w, target_h = max(1, target_w), max(1, target_h)
    has_alpha = image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info)
    source = image.convert("RGBA" if has_alpha else "RGB")
    while True:
        scaled = source.resize((target_w, target_h), Image.Resampling.LANCZOS)
        candidates = [(_encode(scaled, "PNG"), "image/png")]
        flat = scaled.convert("RGB")
        candidates += [(_encode(flat, "JPEG", quality=q), "image/jpeg") for q in _JPEG_QUALITIES]
        for encoded, mime in candidates:
            if len(encoded) < max_bytes:
                return ResizedImage(encoded, mime, width, height, target_w, target_h, True)
        if target_w == 1 and target_h == 1:
            return None
        target_w = 1 if target_w == 1 else max(1, int(target_w * 0.75))
        target_h = 1 if target_h == 1 else max(1, int(target_h * 0.75))


def dimension_note(image: ResizedImage) -> str | None:
    """pi's note for a resized image (None when it was sent unchanged)."""
    if not image.was_resized:
        return None
    scale = image.original_width / image.width
    return (
        f"[Image: original {image.original_width}x{image.original_height}, displayed at "
        f"{image.width}x{image.height}. Multiply coordinates by {scale:.2f} to map to original image.]"
    )


#: pi's text for an image not sent because of the ``images.blockImages`` setting.
IMAGES_BLOCKED = "Image reading is disabled."


def block_images(messages: list[Any]) -> list[Any]:
    """``messages`` (LLM messages) with every image of a user message or tool result replaced
    by :data:`IMAGES_BLOCKED`, consecutive ones kept once (pi's ``blockImages``). Returns a
    new list; the messages themselves are not mutated."""
    import msgspec

    from ..ai.types import ImageContent, TextContent, ToolResultMessage, UserMessage

    out: list[Any] = []
    for msg in messages:
        content = getattr(msg, "content", None)
        if (
            isinstance(msg, (UserMessage, ToolResultMessage))
            and isinstance(content, list)
            and any(isinstance(b, ImageContent) for b in content)
        ):
            blocks: list[Any] = []
            for block in content:
                if isinstance(block, ImageContent):
                    block = TextContent(text=IMAGES_BLOCKED)
                previous = blocks[-1] if blocks else None
                if (
                    isinstance(block, TextContent)
                    and block.text == IMAGES_BLOCKED
                    and isinstance(previous, TextContent)
                    and previous.text == IMAGES_BLOCKED
                ):
                    continue
                blocks.append(block)
            msg = msgspec.structs.replace(msg, content=blocks)
        out.append(msg)
    return out
