"""`raising`: a Python provider whose plan fails with an exception it does not catch, as
a bug would, and whose validate does for `parts` that is not a number. Built like an
author's, with `wconverge_sdk.reported` on its exports: the exception becomes the
resource's error (a problem, in validate), with its traceback."""

from typing import List

import wit_world
from wit_world.imports.types import (
    Attribute,
    Behaviour,
    Change,
    Concurrency,
    ProviderInfo,
    Resource,
    TypeSchema,
)
from wconverge_sdk import attribute, get, reported, string_value


def ratio(total: int, parts: int) -> float:
    return total / parts


class WitWorld(wit_world.WitWorld):
    def describe(self) -> ProviderInfo:
        return ProviderInfo(
            name="raising",
            version="1.0.0",
            requires=None,
            types=[
                TypeSchema(
                    name="raising",
                    doc="Fails its plan with an exception when `parts` is `0`.",
                    attributes=[
                        attribute("name", "A name.", Behaviour.NAMEVAR),
                        attribute("parts", "Into how many parts.", Behaviour.PARAMETER),
                    ],
                    invariants=[],
                    refreshable=False,
                    context=[],
                    batch_state=False,
                    concurrency=Concurrency.ONE_AT_A_TIME,
                    watches=[],
                )
            ],
        )

    @reported
    def validate(self, resources: List[Resource]) -> List[List[str]]:
        # A bug: `parts` that is not a number raises instead of being a problem.
        return [[] if int(get(resource, "parts") or "1") >= 0 else ["negative"]
                for resource in resources]

    def check(self, resources: List[Resource]) -> list:
        return []

    @reported
    def current_state(self, resource: Resource) -> List[Attribute]:
        return [Attribute(name="parts", value=string_value("1"))]

    @reported
    def plan(self, resource: Resource, current: List[Attribute]) -> List[Change]:
        ratio(100, int(get(resource, "parts") or "1"))
        return []

    @reported
    def apply(self, resource: Resource, changes: List[Change]) -> None:
        return None

    @reported
    def refresh(self, resource: Resource) -> None:
        return None
