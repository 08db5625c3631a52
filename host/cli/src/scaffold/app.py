"""`@TYPE@`: a file with the content it is given, or no file, as a wconverge provider in
Python (written by `wconverge plugins new --lang python`).

    @TYPE@ { '/var/lib/@NAME@/motd': content => "hello\n" }
    @TYPE@ { '/var/lib/@NAME@/old': ensure => absent }

Built with componentize-py and `--stub-wasi`, the component has no file system of its
own: it acts through programs launched by the host (`test`, `cat`, `tee`, `rm`), each
checked against the policy's argument patterns. `current_state` reads what is there,
`plan` compares it with the resource (and must depend on its arguments alone), `apply`
makes the changes. `@reported` turns any other exception into the resource's error,
with its traceback.
"""

from typing import List

import wit_world
from componentize_py_types import Err, Ok
from wit_world.imports.types import (
    Attribute,
    Behaviour,
    Change,
    Checked,
    Concurrency,
    PathAccess,
    ProviderInfo,
    Resource,
    TypeSchema,
)
from wconverge_sdk import (
    attribute,
    command,
    enumeration,
    exit_code,
    failure,
    get,
    reported,
    require,
    string_of,
    string_value,
)

VERSION = "0.1.0"


class WitWorld(wit_world.WitWorld):
    @reported
    def describe(self) -> ProviderInfo:
        return ProviderInfo(
            name="@NAME@",
            version=VERSION,
            requires=None,
            types=[
                TypeSchema(
                    name="@TYPE@",
                    doc="A file with the content it is given, or no file.",
                    attributes=[
                        attribute("path", "The file's absolute path.", Behaviour.NAMEVAR,
                                  path_access=PathAccess.READ_WRITE,
                                  checks=['{ if $it !~ /^\\// { "`path` is an absolute path" } }']),
                        attribute("ensure", "Whether the file exists.", default="present",
                                  data_type=enumeration(["present", "absent"])),
                        attribute("content", "What the file holds when present."),
                    ],
                    invariants=[],
                    refreshable=False,
                    context=[],
                    batch_state=False,
                    concurrency=Concurrency.PER_PATH,
                    # Files whose changes mean drift beyond the path attributes (a
                    # watching agent watches `path` already): `["/etc/app/{name}"]`.
                    watches=[],
                )
            ],
        )

    @reported
    def validate(self, resources: List[Resource]) -> List[List[str]]:
        return [[] for _ in resources]

    def check(self, resources: List[Resource]) -> list:
        # Only called for types that set `batch_state`; this one does not.
        checked: list = []
        for resource in resources:
            try:
                current = self.current_state(resource)
                checked.append(Ok(Checked(current=current,
                                          changes=self.plan(resource, current))))
            except Err as error:
                checked.append(error)
        return checked

    @reported
    def current_state(self, resource: Resource) -> List[Attribute]:
        path = require(resource, "path")
        if exit_code(command("/usr/bin/test", ["-e", path])) != 0:
            return [Attribute(name="ensure", value=string_value("absent"))]
        output = command("/usr/bin/cat", ["--", path])
        if exit_code(output) != 0:
            raise failure(output, f"reading {path}")
        return [
            Attribute(name="ensure", value=string_value("present")),
            Attribute(name="content", value=string_value(output.stdout.decode("utf-8", "replace"))),
        ]

    @reported
    def plan(self, resource: Resource, current: List[Attribute]) -> List[Change]:
        now = {attr.name: string_of(attr.value) for attr in current}
        wanted = get(resource, "ensure") or "present"
        if now.get("ensure") != wanted:
            return [Change(attribute="ensure", current=string_value(now.get("ensure") or "absent"),
                           desired=string_value(wanted),
                           message="created" if wanted == "present" else "removed", diff=None)]
        content = get(resource, "content")
        if wanted == "present" and content is not None and now.get("content") != content:
            return [Change(attribute="content", current=None, desired=None,
                           message="content changed", diff=None)]
        return []

    @reported
    def apply(self, resource: Resource, changes: List[Change]) -> None:
        path = require(resource, "path")
        if get(resource, "ensure") == "absent":
            output = command("/usr/bin/rm", ["-f", "--", path])
        else:
            content = (get(resource, "content") or "").encode("utf-8")
            output = command("/usr/bin/tee", ["--", path], stdin=content)
        if exit_code(output) != 0:
            raise failure(output, f"converging {path}")

    @reported
    def refresh(self, resource: Resource) -> None:
        return None
