"""`git_config`: one key of a git configuration file, as Puppet's `git_config`.

A wconverge provider written in Python and built with componentize-py against
wconverge's `wit/` (world `provider`), and nothing else of wconverge: the plugin
contract is language-neutral, values cross it as WIT records any language reads.

    git_config { 'user.email':
      value => 'ops@example.com',
      file  => '/home/deploy/.gitconfig',
      user  => 'deploy',
    }

It converges by running `git config --file FILE ...` through the host's `process`
import: the policy decides which programs, with which arguments, as which user. Built
with `--stub-wasi`, the component imports wconverge's interfaces and no WASI at all: no
file system, no clocks, no network; everything it does on the machine is a launch the
host checks and records.
"""

from typing import List

import wit_world
from componentize_py_types import Err, Ok
from wit_world.imports import log, process
from wit_world.imports.types import (
    Attribute,
    BeforeAfter,
    Behaviour,
    Change,
    Checked,
    Concurrency,
    Diff_BeforeAfter,
    ProviderInfo,
    Resource,
    TypeSchema,
)
# The vendorable helpers of wconverge's Python SDK (`guest-sdk/python/`).
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

VERSION = "1.0.0"
GIT = "/usr/bin/git"


def git(resource: Resource, *args: str) -> process.Output:
    """Runs `git config --file FILE ARGS...` as the resource's user."""
    return command(GIT, ["config", "--file", require(resource, "file"), *args],
                   user=get(resource, "user"))


class WitWorld(wit_world.WitWorld):
    @reported
    def describe(self) -> ProviderInfo:
        ensure = enumeration(["present", "absent"])
        return ProviderInfo(
            name="git_config",
            version=VERSION,
            requires=None,
            types=[
                TypeSchema(
                    name="git_config",
                    doc="One key of a git configuration file, set or unset with git config.",
                    attributes=[
                        attribute("key", "The key, as `section.name`.", Behaviour.NAMEVAR),
                        attribute("ensure", "Whether the key is set.", default="present",
                                  data_type=ensure),
                        attribute("value", "Its value, with `ensure => present`."),
                        attribute("file", "Absolute path of the configuration file.",
                                  Behaviour.PARAMETER, required=True),
                        attribute("user", "Who runs git (default: wconverge's user).",
                                  Behaviour.PARAMETER),
                    ],
                    invariants=[],
                    refreshable=False,
                    context=[],
                    batch_state=False,
                    # git locks the configuration file: one at a time.
                    concurrency=Concurrency.ONE_AT_A_TIME,
                    # The `file` attribute is a plain string, not a path attribute:
                    # a watching agent is told to watch it.
                    watches=["{file}"],
                )
            ],
        )

    @reported
    def validate(self, resources: List[Resource]) -> List[List[str]]:
        return [self.problems(resource) for resource in resources]

    def problems(self, resource: Resource) -> List[str]:
        problems = []
        key = get(resource, "key") or ""
        if "." not in key.strip(".") or key.startswith("-"):
            problems.append(f"`key` `{key}` is not `section.name`")
        file = get(resource, "file") or ""
        if not file.startswith("/"):
            problems.append(f"`file` `{file}` is not an absolute path")
        if get(resource, "ensure") != "absent" and get(resource, "value") is None:
            problems.append("`value` is required with `ensure => present`")
        return problems

    def check(self, resources: List[Resource]) -> list:
        # Only called for types that set `batch_state`; git_config does not.
        checked: list = []
        for resource in resources:
            try:
                current = self.current_state(resource)
                changes = self.plan(resource, current)
                checked.append(Ok(Checked(current=current, changes=changes)))
            except Err as error:
                checked.append(error)
        return checked

    @reported
    def current_state(self, resource: Resource) -> List[Attribute]:
        output = git(resource, "--get", require(resource, "key"))
        code = exit_code(output)
        if code == 1:
            return [Attribute(name="ensure", value=string_value("absent"))]
        if code != 0:
            raise failure(output, "reading the key")
        value = output.stdout.decode("utf-8", "replace").rstrip("\n")
        return [
            Attribute(name="ensure", value=string_value("present")),
            Attribute(name="value", value=string_value(value)),
        ]

    @reported
    def plan(self, resource: Resource, current: List[Attribute]) -> List[Change]:
        now = {attr.name: string_of(attr.value) for attr in current}
        key = require(resource, "key")
        if get(resource, "ensure") == "absent":
            if now.get("ensure") == "absent":
                return []
            return [Change(attribute="ensure", current=string_value("present"),
                           desired=string_value("absent"), message=f"{key} unset", diff=None)]
        wanted = require(resource, "value")
        if now.get("value") == wanted:
            return []
        before = now.get("value")
        return [Change(attribute="value",
                       current=None if before is None else string_value(before),
                       desired=string_value(wanted), message=f"{key} set",
                       diff=None if before is None else Diff_BeforeAfter(
                           value=BeforeAfter(before=before, after=wanted)))]

    @reported
    def apply(self, resource: Resource, changes: List[Change]) -> None:
        key = require(resource, "key")
        if get(resource, "ensure") == "absent":
            output = git(resource, "--unset-all", key)
        else:
            output = git(resource, "--replace-all", key, require(resource, "value"))
        if exit_code(output) != 0:
            raise failure(output, f"setting {key}")
        log.log(log.Level.DEBUG, f"git config {key} converged")

    @reported
    def refresh(self, resource: Resource) -> None:
        return None
