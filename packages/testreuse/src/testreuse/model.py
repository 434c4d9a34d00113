"""The typed config model: one source for validation, the JSON Schema and the documented defaults."""

from __future__ import annotations

import enum
import re
from typing import Annotated, Any, Literal

import torch
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

EXACT_NAME = re.compile(r"[A-Za-z_]\w*::[A-Za-z_]\w*")
# A `*` that no regex atom precedes (not after `.`, `)`, `]`, `}` or an escape): a glob, as in `*TestModule*::test_x`.
GLOB_STAR = re.compile(r"(?:^|(?<![.)\]}\\]))\*")
IDENTIFIER = r"^[A-Za-z_]\w*$"
NameKind = Literal["exact", "glob", "method", "regex"]


class Mode(enum.StrEnum):
    """The four outcome buckets."""

    mandatory_success = "mandatory_success"
    xfail = "xfail"
    xfail_strict = "xfail_strict"
    skip = "skip"


DEFAULT_UNLISTED_MODE = Mode.skip
# The reason a case records when its rule's mode needs one and the config gives none (torch-spyre's users often don't).
NONE_GIVEN = "none given"


def _torch_dtype(name: str) -> str:
    if not isinstance(getattr(torch, name, None), torch.dtype):
        raise ValueError(f"{name!r} is not a torch dtype")
    return name


def name_kind(name: str) -> NameKind:
    """How a test name matches: `Class::test` exactly; a glob (a bare `*`) with fnmatch; a name without `::` as a
    prefix-anchored regex on the method name in any class (torch-spyre's form); else a regex on `Class::test`."""
    if EXACT_NAME.fullmatch(name):
        return "exact"
    if GLOB_STAR.search(name):
        return "glob"
    return "method" if "::" not in name else "regex"


def _case_name(name: str) -> str:
    if name_kind(name) in ("exact", "glob"):
        return name
    try:
        re.compile(name)
    except re.error as exc:
        raise ValueError(f"{name!r} is neither Class::test, a glob nor a valid regex ({exc})") from None
    return name


def _bare_op(value: Any) -> Any:
    """torch-spyre writes a supported op without dtypes as its bare name: `supported_ops: [add, {name: mul}]`."""
    return {"name": value} if isinstance(value, str) else value


def _torch_specifier(text: str) -> str:
    """A PEP 440 specifier set for torch's public version; local labels (`+cpu`) never take part."""
    if not text.strip():
        raise ValueError("an empty torch specifier would match every version: give one, e.g. '>=2.14'")
    try:
        specifiers = SpecifierSet(text)
    except InvalidSpecifier:
        raise ValueError(f"{text!r} is not a PEP 440 version specifier set (e.g. '>=2.14' or '>=2.13,<2.14')") from None
    local = next((s for s in specifiers if "+" in s.version), None)
    if local is not None:
        raise ValueError(f"{str(local)!r} has a local label: torch's version is compared without it (+cpu, +cu130)")
    return text


def _dtype_scope(value: Any) -> Any:
    """An `only.dtypes` item: a dtype name, or one combination as a non-empty list of names."""
    if isinstance(value, str):
        return _torch_dtype(value)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return [_torch_dtype(v) for v in value]
    raise ValueError(f"{value!r} is neither a dtype name nor a non-empty list of dtype names (one combination)")


DtypeName = Annotated[str, AfterValidator(_torch_dtype)]
DtypeScope = Annotated[str | list[str], BeforeValidator(_dtype_scope)]
TorchSpecifier = Annotated[
    str,
    AfterValidator(_torch_specifier),
    Field(description="PEP 440 specifier set on the running torch's public version, e.g. '>=2.14'."),
]
CaseName = Annotated[str, AfterValidator(_case_name)]
ParamValues = Annotated[
    list[Annotated[str | bool | int | float | None, AfterValidator(str)]],
    Field(min_length=1, description="The values, any one of which matches; kept as their text (`true`: 'True')."),
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Description = Annotated[str | None, Field(description="Free text for readers; no effect.")]


class Dtype(Strict):
    name: DtypeName = Field(description="A torch dtype name, e.g. float32 or bfloat16.")
    description: Description = None


class Tolerance(Strict):
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)


class OpDtype(Dtype):
    precision: Tolerance | None = Field(None, description="Comparison tolerance for this op's cases of this dtype.")


class DtypeSpec(OpDtype):
    force_xfail: bool = Field(False, description="This dtype's mandatory_success cases become xfail.")


class Named(Strict):
    name: str = Field(min_length=1, description="An OpInfo full name (ops) or a ModuleInfo name (modules).")
    description: Description = None


class DtypeEdit(Strict):
    include: list[DtypeSpec] | None = Field(None, description="Add these dtypes to the tests' @dtypes lists.")
    exclude: list[Dtype] = Field(default_factory=list, description="Drop these dtypes.")


class NamedEdit(Strict):
    include: list[Named] | None = Field(None, description="Add these to the tests' @ops / @modules lists.")
    exclude: list[Named] = Field(default_factory=list, description="Drop these.")


class Function(Strict):
    name: str = Field(pattern=IDENTIFIER, description="A TestCase method, e.g. assertEqual.")


class FunctionEdit(Strict):
    cpu_move: list[Function] = Field(
        default_factory=list, description="TestCase methods whose tensor arguments move to CPU first."
    )


class Shape(Strict):
    shape: list[Annotated[int, Field(ge=0)]] = Field(description="Input shape of the sample to drop.")


class SampleEdit(Strict):
    exclude: list[Shape] = Field(default_factory=list, description="Sample inputs dropped by the input's shape.")


class Precision(Strict):
    op: str = Field(min_length=1, description="OpInfo full name the tolerance applies to.")
    dtype: DtypeName = Field(description="The dtype the tolerance applies to.")
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)


class Edits(Strict):
    """Per-case edits: cases dropped never run; tolerances go through torch's own toleranceOverride."""

    dtypes: DtypeEdit | None = None
    ops: NamedEdit | None = None
    modules: NamedEdit | None = None
    samples: SampleEdit | None = None
    precision: list[Precision] = Field(default_factory=list)
    functions: FunctionEdit | None = None


class Scope(Strict):
    """Restrict a rule to some cases of its tests (op, dtype, module) or torch versions; an empty one matches none."""

    ops: list[Annotated[str, Field(min_length=1)]] | None = Field(None, min_length=1)
    dtypes: list[DtypeScope] | None = Field(
        None,
        min_length=1,
        description="A case with one of these dtypes; a list item, e.g. [float32, int64], matches a case whose dtypes "
        "are exactly those, in that order (one cell of a test parametrized by two dtypes).",
    )
    modules: list[Annotated[str, Field(min_length=1)]] | None = Field(None, min_length=1)
    params: dict[Annotated[str, Field(min_length=1)], ParamValues] | None = Field(
        None,
        min_length=1,
        description="A case whose `@parametrize` arguments take one of the listed values each, compared as text "
        "(`sparse_grad: [true]` matches True): one cell of a test parametrized beyond op, dtype and module.",
    )
    torch: TorchSpecifier | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> Scope:
        if all(v is None for v in (self.ops, self.dtypes, self.modules, self.params, self.torch)):
            raise ValueError("an empty scope matches no case: give ops, dtypes, modules, params or torch")
        return self


class Rule(Strict):
    names: list[CaseName] = Field(
        min_length=1,
        description="Generic `Class::test` names; globs; bare method names (prefix regex, any class); regexes.",
    )
    mode: Mode = Field(Mode.mandatory_success, description="Outcome bucket for the matched tests (as torch-spyre).")
    reason: str | None = Field(
        None,
        description="Why. Without it: the comment block above the entry and the comments trailing its lines. Every "
        "mode but mandatory_success needs one; none is a warning (its cases record 'none given'), an error under "
        "`testreuse validate --strict`.",
    )
    only: Scope | None = Field(
        None, description="Apply this rule only to cases with these ops/dtypes/modules, on these torch versions."
    )
    labels: list[str] = Field(default_factory=list, description="Tiers for these tests, as `label__<name>` marks.")
    tags: list[Annotated[str, Field(pattern=IDENTIFIER)]] = Field(
        default_factory=list, description="pytest marks on these tests' cases, also JUnit properties."
    )
    description: Description = None
    no_grad: bool = Field(False, description="Run these tests under torch.no_grad().")
    edits: Edits | None = None

    @property
    def lacks_reason(self) -> bool:
        """Its mode needs a reason (every mode but mandatory_success) and it has none, neither written nor taken from
        a comment: accepted with a warning, refused by `testreuse validate --strict`."""
        return self.mode is not Mode.mandatory_success and not (self.reason or "").strip()


class FileEntry(Strict):
    path: str = Field(min_length=1, description="Upstream test file; `${TORCH_ROOT}` and globs expand.")
    unlisted_test_mode: Mode = Field(DEFAULT_UNLISTED_MODE, description="Outcome for every test no rule names.")
    tests: list[Rule] = Field(default_factory=list)


class SupportedOp(Strict):
    name: str = Field(min_length=1)
    description: Description = None
    force_xfail: bool = Field(False, description="This op's mandatory_success cases become xfail.")
    dtypes: list[OpDtype] | None = Field(None, description="Dtypes this op supports; default: supported_dtypes.")


class CapabilitySource(Strict):
    """A backend's own capability export: a command printing YAML/JSON, or a file; exactly one."""

    command: str | None = Field(None, min_length=1)
    file: str | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _exactly_one(self) -> CapabilitySource:
        if (self.command is None) == (self.file is None):
            raise ValueError("give exactly one of command or file")
        return self


class Capabilities(Strict):
    supported_dtypes: list[DtypeSpec] | None = None
    supported_ops: list[Annotated[SupportedOp, BeforeValidator(_bare_op)]] | None = None
    supported_modules: list[Named] | None = None


class InputConfig(Strict):
    seed: int | None = Field(None, description="Seed torch's, Python's and NumPy's RNGs after each test's setUp.")


class GlobalConfig(Capabilities):
    capabilities: CapabilitySource | None = Field(
        None, description="Take capabilities from the backend's export; keys given here override it."
    )
    input_config: InputConfig | None = None


class CompileConfig(Strict):
    mode: Literal["inductor", "aot_eager", "dynamo"] = Field(
        description="torch's own compiled test run: PYTORCH_TEST_WITH_INDUCTOR, _AOT_EAGER or _DYNAMO; each test's "
        "TestCase.run is wrapped in torch.compile with that backend."
    )
    backend: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?$",
        description="MODULE[:FUNC] imported (and called) before collection: the device's compiler backend.",
    )
    dynamic: bool | None = Field(
        None,
        description="false: a recompile keeps static shapes (dynamo's automatic dynamic shapes off, "
        "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_SHAPES=0), for a backend that compiles static shapes only; unset: torch's "
        "default, where a recompile marks the sizes that changed dynamic.",
    )


class SuiteConfig(Strict):
    labels: list[str] = Field(default_factory=list, description="Tiers for every test of this config.")
    compile: CompileConfig | None = Field(
        None, description="Run every selected test of the run compiled; configs of one run must agree."
    )
    files: list[FileEntry] = Field(default_factory=list)
    global_: GlobalConfig | None = Field(None, alias="global")


class ConfigFile(Strict):
    """One testreuse config file."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="testreuse config")
    test_suite_config: SuiteConfig


class CapabilityExport(Capabilities):
    """What a backend's capability export must contain; keys beyond these are the backend's own business."""

    model_config = ConfigDict(extra="ignore", frozen=True)
