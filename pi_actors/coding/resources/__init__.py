"""Skills and prompt templates: finding them, the system prompt's skills block, and
expanding ``/skill:name`` and ``/template`` in what the user sends — the same code for every
mode (the coordinator expands prompts, the TUI lists and completes them).

Modules: :mod:`._frontmatter` (the Markdown files' front matter), :mod:`.skills`,
:mod:`.templates`, :mod:`.discovery` (where they are found; :func:`load_resources`).
"""

from ._frontmatter import parse_frontmatter
from .discovery import PackageResources, ResourceOptions, Resources, expand_input, load_resources, project_dirs
from .skills import Skill, SkillError, expand_skill_command, format_skills_for_prompt, load_skills_from
from .templates import PromptTemplate, expand_prompt_template, split_arguments, substitute_arguments

__all__ = [
    "PackageResources",
    "PromptTemplate",
    "ResourceOptions",
    "Resources",
    "Skill",
    "SkillError",
    "expand_input",
    "expand_prompt_template",
    "expand_skill_command",
    "format_skills_for_prompt",
    "load_resources",
    "load_skills_from",
    "parse_frontmatter",
    "project_dirs",
    "split_arguments",
    "substitute_arguments",
]
