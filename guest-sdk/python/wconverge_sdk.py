"""Helpers for a wconverge provider written in Python, over the bindings componentize-py
generates from wconverge's WIT (world `provider`).

Vendor this file (and `wit/`) into your project: it depends on nothing but the bindings
(`wit_world`, generated when the component is built) and `componentize_py_types`. The
contract itself is the WIT; these helpers only make its values shorter to write:

    from wconverge_sdk import attribute, get, require, string_value

A provider raises `componentize_py_types.Err(message)` to fail a resource: the message is
the resource's error in the report. Decorate every export with `@reported`, so that any
other exception is reported with its traceback rather than as a trap that says only
"unreachable": in `current_state`, `plan`, `apply` and `refresh` it becomes the
resource's error; in `validate`, a problem of each resource of the call; in `describe`,
which has no error to give, it is logged before the plugin stops, and the host's load
error shows it. Nothing may print, read files or use the clock at run
time when the component is built with `--stub-wasi` (as it should be): every action on
the machine is a program launched through `command(...)`, which the policy checks.
"""

import functools
import traceback
from typing import Callable, List, Optional, Sequence, TypeVar

from componentize_py_types import Err
from wit_world.imports import log, process
from wit_world.imports.types import (
    AttributeSchema,
    Behaviour,
    DataType,
    PathAccess,
    Resource,
    TypeNode_Enumeration,
    TypeNode_String,
    Value,
    ValueNode_String,
)

#: The data type of a single string.
STRING = DataType(nodes=[TypeNode_String()])


def enumeration(cases: Sequence[str]) -> DataType:
    """The data type of one of `cases`."""
    return DataType(nodes=[TypeNode_Enumeration(value=list(cases))])


def string_value(text: str) -> Value:
    """A string as a WIT value."""
    return Value(nodes=[ValueNode_String(value=text)])


def string_of(value: Optional[Value]) -> Optional[str]:
    """The string a WIT value holds, or `None` when it holds something else."""
    if value is None or not value.nodes:
        return None
    root = value.nodes[0]
    return root.value if isinstance(root, ValueNode_String) else None


def attribute(name: str, doc: str, behaviour: Behaviour = Behaviour.PROPERTY,
              required: bool = False, default: Optional[str] = None,
              data_type: DataType = STRING,
              path_access: PathAccess = PathAccess.NONE,
              checks: Optional[List[str]] = None) -> AttributeSchema:
    """One attribute of a type's schema: a single value, optional unless `required`.

    `checks` are written in wconverge's manifest language and evaluated by the host
    before the run (see docs/writing-a-provider.md, "Checks and invariants as data").
    """
    return AttributeSchema(
        name=name,
        doc=doc,
        data_type=data_type,
        min=1 if required else 0,
        max=1,
        default=None if default is None else string_value(default),
        behaviour=behaviour,
        sensitive=False,
        unsettable=False,
        path_access=path_access,
        checks=checks or [],
        refers_to=None,
        home_default=None,
    )


def get(resource: Resource, name: str) -> Optional[str]:
    """The string value of attribute `name`, or `None` when it is not set."""
    for attr in resource.attributes:
        if attr.name == name:
            return string_of(attr.value)
    return None


def require(resource: Resource, name: str) -> str:
    """The string value of attribute `name`; a resource error when it is not set."""
    value = get(resource, name)
    if value is None:
        raise Err(f"attribute `{name}` is missing")
    return value


def command(program: str, args: Sequence[str], user: Optional[str] = None,
            timeout_ms: int = 60_000, stdin: Optional[bytes] = None) -> process.Output:
    """Runs `program` with `args` through the host, as `user` (default: wconverge's or
    the policy's `run_as`): the policy decides which programs and arguments."""
    launched = process.Command(
        program=program,
        args=list(args),
        cwd=None,
        env=[],
        user=user,
        group=None,
        umask=None,
        timeout_ms=timeout_ms,
        stdin=stdin,
        architecture=None,
    )
    try:
        return process.run(launched)
    except Err as error:
        raise Err(f"cannot run {program}: {error.value.value}")


def exit_code(output: process.Output) -> Optional[int]:
    """The program's exit code, or `None` when a signal ended it."""
    status = output.status
    return status.value if isinstance(status, process.ExitStatus_Exited) else None


def failure(output: process.Output, what: str) -> Err:
    """A resource error saying `what` failed, with the program's stderr."""
    detail = output.stderr.decode("utf-8", "replace").strip()
    return Err(f"{what} failed (status {output.status}): {detail}")


#: Frames a reported traceback shows at most (the innermost ones).
MAX_FRAMES = 30

F = TypeVar("F", bound=Callable)


def describe_exception(error: BaseException) -> str:
    """The exception as Python prints it, from the frames alone: built with
    `--stub-wasi`, the component cannot read its source files for the lines' text."""
    frames = [
        f'  File "{frame.f_code.co_filename}", line {lineno}, in {frame.f_code.co_name}'
        for frame, lineno in traceback.walk_tb(error.__traceback__)
    ]
    if len(frames) > MAX_FRAMES:
        frames = [f"  ... {len(frames) - MAX_FRAMES} frames left out"] + frames[-MAX_FRAMES:]
    summary = f"{type(error).__name__}: {error}"[:1000]
    return "\n".join([summary, "Traceback (most recent call last):", *frames])


def reported(method: F) -> F:
    """Reports an exception in an export with its traceback: as the resource's error
    (`current_state`, `plan`, `apply`, `refresh`), as a problem of each resource of the
    call (`validate`), or logged before the plugin stops (`describe`)."""

    if method.__name__ == "validate":

        @functools.wraps(method)
        def validate(self, resources):
            try:
                return method(self, resources)
            except Exception as error:  # noqa: BLE001 - validate has no error to give
                problem = "the plugin failed: " + describe_exception(error)
                return [[problem] for _ in resources]

        return validate  # type: ignore[return-value]

    if method.__name__ == "describe":

        @functools.wraps(method)
        def describe(*args, **kwargs):
            try:
                return method(*args, **kwargs)
            except Exception as error:
                log.log(log.Level.ERROR, describe_exception(error))
                raise

        return describe  # type: ignore[return-value]

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except Err:
            raise
        except Exception as error:  # noqa: BLE001 - every failure becomes the resource's
            raise Err(describe_exception(error)) from None

    return wrapper  # type: ignore[return-value]
