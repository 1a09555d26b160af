// Safe rendering of untrusted text (model replies, tool output, session names...).
//
// Everything that comes from the model or a tool is untrusted. Two ways into the page only:
//  - text(): a Text node (never parsed as HTML);
//  - markdown(): marked turns Markdown into HTML, DOMPurify sanitizes it into a DOM fragment
//    (no script, no event handler attribute, no style, no form, no iframe/object/embed, no
//    images), links are kept only for http:, https: and mailto: (anything else — javascript:,
//    data:, relative — loses its href) and open in a new tab without a referrer; code blocks
//    are then highlighted by highlight.js, which reads the element's text and writes escaped
//    spans. No string from the model is ever assigned to innerHTML without DOMPurify.

import { marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.mjs";
import hljs from "./vendor/highlight.min.js";

const SAFE_LINK = /^(?:https?:|mailto:)/i;

marked.setOptions({ gfm: true, breaks: false, async: false });

const purifier = DOMPurify(window);
purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node.nodeName === "A") {
    const href = node.getAttribute("href") || "";
    if (!SAFE_LINK.test(href.trim())) {
      node.removeAttribute("href");
    } else {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer nofollow");
    }
  }
});

const PURIFY_CONFIG = {
  RETURN_DOM_FRAGMENT: true,
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "img", "form", "input", "button", "textarea", "select", "iframe", "object", "embed",
    "svg", "math", "video", "audio", "source", "picture", "link", "meta", "base"],
  FORBID_ATTR: ["style", "srcset", "action", "formaction"],
  ALLOWED_URI_REGEXP: SAFE_LINK,
};

/** A Text node holding `s` verbatim. */
export function text(s) {
  return document.createTextNode(s == null ? "" : String(s));
}

/** `source` (Markdown) as a sanitized DocumentFragment, code blocks highlighted. */
export function markdown(source) {
  let html;
  try {
    html = marked.parse(String(source == null ? "" : source));
  } catch (_) {
    const frag = document.createDocumentFragment();
    frag.appendChild(text(source));
    return frag;
  }
  const frag = purifier.sanitize(html, PURIFY_CONFIG);
  for (const code of frag.querySelectorAll("pre code")) highlight(code);
  return frag;
}

/** Highlight one <code> element whose content is plain text (a language-xxx class picks the
 *  language when highlight.js knows it). */
export function highlight(code) {
  const cls = [...code.classList].find((c) => c.startsWith("language-"));
  const lang = cls && cls.slice(9);
  const source = code.textContent;
  if (source.length > 200000) return; // too big to be worth it
  try {
    const out = lang && hljs.getLanguage(lang)
      ? hljs.highlight(source, { language: lang, ignoreIllegals: true })
      : hljs.highlightAuto(source);
    // highlight.js escapes the text it returns; it is still sanitized like everything else.
    code.replaceChildren(purifier.sanitize(out.value, { RETURN_DOM_FRAGMENT: true, ALLOWED_TAGS: ["span"], ALLOWED_ATTR: ["class"] }));
    code.classList.add("hljs");
  } catch (_) {
    code.textContent = source;
  }
}

/** A <pre><code> block of plain text, highlighted as `lang` when given. */
export function codeBlock(source, lang) {
  const pre = document.createElement("pre");
  const code = document.createElement("code");
  if (lang) code.className = `language-${lang}`;
  code.textContent = source;
  pre.appendChild(code);
  if (lang) highlight(code);
  return pre;
}
