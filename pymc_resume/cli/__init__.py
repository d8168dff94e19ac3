"""The `pymc-resume` command line: I/O only. Each command lives in its own module here.

Exit codes (shared by every command): 0 every checked id holds, 1 any is violated, 2 bad input,
a failed adapter or an environment that cannot run the check, with a one-line reason and no
traceback; 130 interrupted (Ctrl-C), 143 terminated (SIGTERM), after cleaning up.
"""

from __future__ import annotations

import os
import signal
import sys

import click

from pymc_resume import __version__
from pymc_resume.cli.errors import BAD_INPUT, fail, printable
from pymc_resume.errors import PymcResumeError

INTERRUPTED, TERMINATED = 130, 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, so that its cleanup runs as for Ctrl-C (every
    layer that stops cleanly on an interrupt stops cleanly on it). Click wraps it in an Abort."""


def _terminate_in(pid: int):
    """A SIGTERM handler for the command's process `pid`. Forked children (explorer workers,
    adapter hosts, client processes) inherit it: there SIGTERM does what it does by default."""

    def terminate(signum, frame) -> None:
        if os.getpid() != pid:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise Terminated()

    return terminate


class Group(click.Group):
    """Usage errors and every `PymcResumeError` become one line and exit 2; an interrupt exits
    130 (SIGTERM 143) after cleanup; anything else is a bug, reported in one line too (set
    PYMC_RESUME_DEBUG=1 for its traceback)."""

    def main(self, *args, **kwargs):
        previous = signal.signal(signal.SIGTERM, _terminate_in(os.getpid()))
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click.ClickException as error:
            fail(" ".join(error.format_message().split()))
        except PymcResumeError as error:  # bad input, a failed adapter, a missing service
            fail(" ".join(str(error).split()))
        except (click.exceptions.Abort, KeyboardInterrupt) as error:
            _remove_work_directories_left_behind()
            if isinstance(error, Terminated) or isinstance(error.__cause__, Terminated):
                click.echo("pymc-resume: terminated", err=True)
                sys.exit(TERMINATED)
            click.echo("pymc-resume: interrupted", err=True)
            sys.exit(INTERRUPTED)
        except Exception as error:
            if os.environ.get("PYMC_RESUME_DEBUG") == "1":
                raise
            click.echo(
                f"pymc-resume: internal error (a bug in pymc-resume, please report it; "
                f"PYMC_RESUME_DEBUG=1 shows where): {type(error).__name__}: "
                f"{printable(' '.join(str(error).split()))}",
                err=True,
            )
            sys.exit(BAD_INPUT)
        finally:
            signal.signal(signal.SIGTERM, previous)
        sys.exit(code or 0)


def _remove_work_directories_left_behind() -> None:
    """An interrupt can land after a session made its work directory and before it could
    remove it (or inside the removal): the command is ending, so whatever it still owns goes."""
    from pymc_resume.bridge.hosting.workdirs import remove_owned

    remove_owned()


@click.group(cls=Group)
@click.version_option(__version__, prog_name="pymc-resume")
def main() -> None:
    """Check what "resume" means: the resume contract, exhaustively and on live frameworks."""


def _register_commands() -> None:
    # Imported here so that each command module can import `main` from this package.
    from pymc_resume.cli import (
        check,  # noqa: F401
        diff,  # noqa: F401
        explore,  # noqa: F401
        fuzz,  # noqa: F401
        matrix,  # noqa: F401
        profile,  # noqa: F401
        race,  # noqa: F401
        replay,  # noqa: F401
        report,  # noqa: F401
    )


_register_commands()
