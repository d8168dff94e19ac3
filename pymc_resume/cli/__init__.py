"""The `pymc-resume` command line: I/O only. Each command lives in its own module here.

Exit codes (shared by every command): 0 every checked id holds, 1 any is violated, 2 bad input
or an environment that cannot run the check, with a one-line reason and no traceback.
"""

from __future__ import annotations

import sys

import click

from pymc_resume import __version__
from pymc_resume.cli.errors import fail
from pymc_resume.errors import PymcResumeError


class Group(click.Group):
    """Usage errors become one line and exit 2; an interrupt exits 130; never a traceback."""

    def main(self, *args, **kwargs):
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click.ClickException as error:
            fail(error.format_message().replace("\n", " "))
        except PymcResumeError as error:  # bad input, a failed adapter, a missing service
            fail(" ".join(str(error).split()))
        except (click.exceptions.Abort, KeyboardInterrupt):
            click.echo("pymc-resume: interrupted", err=True)
            sys.exit(130)
        sys.exit(code or 0)


@click.group(cls=Group)
@click.version_option(__version__, prog_name="pymc-resume")
def main() -> None:
    """Check what "resume" means: the resume contract, exhaustively and on live frameworks."""


def _register_commands() -> None:
    # Imported here so that each command module can import `main` from this package.
    from pymc_resume.cli import check  # noqa: F401
    from pymc_resume.cli import matrix  # noqa: F401
    from pymc_resume.cli import fuzz  # noqa: F401
    from pymc_resume.cli import replay  # noqa: F401
    from pymc_resume.cli import race  # noqa: F401
    from pymc_resume.cli import profile  # noqa: F401


_register_commands()
