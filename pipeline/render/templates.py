"""Chat templates: a built-in family (what its template can carry, its tokens, its parse-back), the Jinja
environments (configured as transformers configures them), and the compiled Template."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import io

import jinja2
import jinja2.compiler
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..conversation import Conversation
from ..errors import ConfigError, RenderError
from ..ledger import Ledger, LedgerEntry
from ..resources import TEMPLATES_DIR
from ._inputs import InputPolicy, TemplateInputs, build_inputs
from .marks import GEN_CLOSE, GEN_OPEN, Marks, tojson
from .rendered import DEFAULT_NOW, RenderOptions
from .template_limits import LimitedSandbox, bounded_output, bounded_range, check_value, limits
from .tokenizers import Tokenizer


# --- families and templates -----------------------------------------------------------------------

@dataclass(frozen=True)
class Family:
    """What a built-in template family knows beyond its Jinja file: what it can carry (the input
    policy), its end-of-turn tokens, the tokens it needs, and how to parse its token stream back."""

    name: str
    policy: InputPolicy
    template_file: str | None = None  # under templates/
    eot_tokens: tuple[str, ...] = ()
    required_tokens: tuple[str, ...] = ()
    parse_back: Callable[[str], Conversation] | None = None
    # A family may replace the generic conversion (e.g. one Harmony message per call).
    build_inputs: Callable[[Conversation, Marks, Ledger, InputPolicy], TemplateInputs] | None = None
    default_tokenizer: str | None = None
    # A family may read render options into its input policy (llama3: the `calls` policy).
    configure: Callable[[InputPolicy, RenderOptions], InputPolicy] | None = None
    # A family that restructures turns (llama3 splits them) says what parse-back must equal: the
    # conversation with the ledger's dropped parts removed and the restructuring applied.
    expected: Callable[[Conversation, tuple[LedgerEntry, ...]], Conversation] | None = None
    # Template variables the family sets (harmony: its style), before RenderOptions.template_kwargs.
    template_vars: tuple[tuple[str, Any], ...] = ()
    # What the format carries and how, by capability (CAPABILITIES), for `sftprep templates`.
    carries: tuple[tuple[str, str], ...] = ()

    def inputs(self, conv: Conversation, marks: Marks, ledger: Ledger,
               options: RenderOptions | None = None) -> TemplateInputs:
        policy = self.policy
        if options is not None and self.configure is not None:
            policy = self.configure(policy, options)
        return (self.build_inputs or build_inputs)(conv, marks, ledger, policy)


CAPABILITIES = ("text beside calls", "parallel calls", "reasoning", "call ids", "tool results", "system",
                "developer", "media")

CUSTOM = Family(name="custom", policy=InputPolicy(target="custom template", reasoning="field", developer="system"))


class _Generation(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}`: wraps what the body renders in two sentinels."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_wrap"), [], [], body).set_lineno(lineno)

    def _wrap(self, caller):
        return GEN_OPEN + caller() + GEN_CLOSE


class _InlineGeneration(_Generation):
    """The built-in templates' `{% generation %}`: the two sentinels written as template text around
    the body, with no macro call per region. Same output as `_Generation` for templates that set
    nothing inside a region that they read after it (the project's own; user templates keep the
    call-block scoping transformers gives them)."""

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return [jinja2.nodes.Output([jinja2.nodes.TemplateData(GEN_OPEN)]).set_lineno(lineno), *body,
                jinja2.nodes.Output([jinja2.nodes.TemplateData(GEN_CLOSE)]).set_lineno(lineno)]


class _TemplateDict:
    # `dict(...)` for templates, without exposing the type itself (as transformers does).
    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class _Namespace(jinja2.utils.Namespace):
    # Namespaces refuse underscore names, which lead to CPython internals.
    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _Namespace._check(name)
        check_value(value)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"templates cannot set underscore attributes ({name!r})")


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(fmt):
    return DEFAULT_NOW.strftime(fmt)


def make_environment() -> ImmutableSandboxedEnvironment:
    """A sandbox configured as transformers' apply_chat_template configures it, with limits on the work
    a template may do (template_limits)."""
    env = _configured(LimitedSandbox)
    env.globals["range"] = bounded_range
    return env


def _configured(env_class: type[jinja2.Environment], generation: type[_Generation] = _Generation) -> jinja2.Environment:
    env = env_class(trim_blocks=True, lstrip_blocks=True, extensions=[generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _Namespace
    return env


_ENV = make_environment()
_DICT_ATTRIBUTES = frozenset(dir(dict))


class _TrustedEnvironment(jinja2.Environment):
    """`message.role` on a dict: Jinja tries the attribute first, which raises, then the item. For a
    name no dict attribute has, the item alone gives the same answer without the exception."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                pass
        # jinja2.Environment.getattr, without the call to it (loop.first, a string's methods).
        try:
            return getattr(obj, attribute)
        except AttributeError:
            pass
        try:
            return obj[attribute]
        except (TypeError, LookupError, AttributeError):
            return self.undefined(obj=obj, name=attribute)


class _TrustedCodeGenerator(jinja2.compiler.CodeGenerator):
    """`message.role` on a local name, compiled to what `_TrustedEnvironment.getattr` gives for it without
    the call: the item when the value is a plain dict holding it (and the name no dict attribute has),
    else the call. Most of a built-in template's attribute reads are of message and call dicts."""

    def visit_Getattr(self, node: jinja2.nodes.Getattr, frame) -> None:
        if node.attr in _DICT_ATTRIBUTES or not isinstance(node.node, jinja2.nodes.Name) or self.environment.is_async:
            return super().visit_Getattr(node, frame)
        self.write("(")  # first, so any pending line break is written outside the captured name
        stream, self.stream = self.stream, io.StringIO()
        try:
            self.visit(node.node, frame)
            name = self.stream.getvalue()
        finally:
            self.stream = stream
        attr = repr(node.attr)
        if name.isidentifier():  # a local variable: reading it again costs nothing
            self.write(f"{name}[{attr}] if type({name}) is dict and {attr} in {name} else ")
        self.write(f"environment.getattr({name}, {attr}))")


# The built-in templates (files of this project) are trusted code: rendered without the sandbox's checks
# on every attribute access and call, which cost a fifth of their render time. Same output; user
# templates always run sandboxed.
_TrustedEnvironment.code_generator_class = _TrustedCodeGenerator
_TRUSTED_ENV = _configured(_TrustedEnvironment, _InlineGeneration)


@dataclass(frozen=True, eq=False)
class Template:
    name: str
    source: str
    family: Family
    builtin: bool
    compiled: jinja2.Template = field(repr=False)

    @classmethod
    def compile(cls, name: str, source: str, family: Family = CUSTOM, builtin: bool = False) -> "Template":
        try:
            compiled = (_TRUSTED_ENV if builtin else _ENV).from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(f"template '{name}' does not compile: {exc.message} (line {exc.lineno})",
                              code="bad_template") from None
        return cls(name=name, source=source, family=family, builtin=builtin, compiled=compiled)

    @classmethod
    def from_family(cls, family: Family) -> "Template":
        assert family.template_file is not None
        path = TEMPLATES_DIR / family.template_file
        return cls.compile(family.name, path.read_text(encoding="utf-8"), family, builtin=True)

    def render_raw(self, inputs: TemplateInputs, tokenizer: Tokenizer | None, options: RenderOptions) -> str:
        """The template's output, sentinels included. Template failures become RenderError."""
        now = options.now
        variables: dict[str, Any] = dict(tokenizer.special_tokens_map) if tokenizer is not None else {}
        variables.update(messages=inputs.messages, tools=inputs.tools, documents=None,
                         add_generation_prompt=options.add_generation_prompt,
                         strftime_now=lambda fmt: now.strftime(fmt), date_string=now.strftime("%d %b %Y"))
        variables.update(self.family.template_vars)
        variables.update(options.template_kwargs)
        try:
            if self.builtin:
                return self.compiled.render(**variables)
            with limits(self.name):
                return bounded_output(self.compiled.generate(**variables))
        except jinja2.exceptions.SecurityError as exc:
            raise RenderError(f"template '{self.name}' tried something the sandbox forbids: {exc}",
                              code="template_security") from None
        except jinja2.exceptions.TemplateError as exc:
            raise RenderError(f"template '{self.name}' raised: {exc}", code="template_error") from None
        except (TypeError, ValueError, KeyError, AttributeError, IndexError, ArithmeticError) as exc:
            raise RenderError(f"template '{self.name}' failed: {type(exc).__name__}: {exc}",
                              code="template_error") from None
