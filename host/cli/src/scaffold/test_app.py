"""The provider's unit test, natively: `python3 -m unittest test_app` (after the bindings are
generated, see the README). The host's `process.run` is stood in for by running the
program here, in a temporary directory."""

import os
import subprocess
import tempfile
import unittest
from unittest import mock

from wit_world.imports import process
from wit_world.imports.types import Attribute, Resource

import app
from wconverge_sdk import string_value


def run_here(launch: process.Command) -> process.Output:
    done = subprocess.run([launch.program, *launch.args], input=launch.stdin or b"",
                          capture_output=True, check=False)
    return process.Output(status=process.ExitStatus_Exited(value=done.returncode),
                          stdout=done.stdout, stderr=done.stderr, stdout_truncated=False,
                          stderr_truncated=False, duration_ms=0)


def resource(path: str, **attributes: str) -> Resource:
    given = [Attribute(name="path", value=string_value(path))]
    given += [Attribute(name=name, value=string_value(value))
              for name, value in attributes.items()]
    return Resource(type_name="@TYPE@", title=path, attributes=given, context=[])


class ConvergesThenStaysQuiet(unittest.TestCase):
    @mock.patch.object(process, "run", run_here)
    def test_converges_then_stays_quiet(self) -> None:
        plugin = app.WitWorld()
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "motd")
            wanted = resource(path, content="hello\n")
            changes = plugin.plan(wanted, plugin.current_state(wanted))
            self.assertEqual([change.attribute for change in changes], ["ensure"])
            plugin.apply(wanted, changes)
            with open(path, encoding="utf-8") as written:
                self.assertEqual(written.read(), "hello\n")
            self.assertEqual(plugin.plan(wanted, plugin.current_state(wanted)), [])
            gone = resource(path, ensure="absent")
            plugin.apply(gone, plugin.plan(gone, plugin.current_state(gone)))
            self.assertFalse(os.path.exists(path))


if __name__ == "__main__":
    unittest.main()
