"""`etwd --help` and README.md's Configuration section name the same options (issue 24): every
`--option` the binary's help text mentions is in the README's Configuration section, and every
`--option` that section mentions is one the binary knows; every command of the help's usage lines
(convert, tokens, selftest, remote, service, …) has its row in that section's table."""
import os
import re
import subprocess

from etwd_harness import check, done, SRC, BIN

OPT = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]")


def readme_configuration():
    with open(os.path.join(SRC, "README.md")) as f:
        text = f.read()
    m = re.search(r"^### Configuration\n(.*?)(?=^##)", text, re.S | re.M)
    check(m is not None, "README.md has no '### Configuration' section")
    return m.group(1) if m else ""


def main():
    r = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "etwd --help exited %d: %s" % (r.returncode, r.stderr))
    helped = set(OPT.findall(r.stdout))
    check(len(helped) > 20, "--help names only %d options: %s" % (len(helped), r.stdout))
    documented = set(OPT.findall(readme_configuration()))
    check(not helped - documented,
          "in `etwd --help` but not in README's Configuration: %s" % sorted(helped - documented))
    check(not documented - helped,
          "in README's Configuration but not in `etwd --help`: %s" % sorted(documented - helped))
    commands = set(re.findall(r"^(?:Usage:)?\s+etwd ([a-z]+) ", r.stdout, re.M)) - {"serve"}
    check({"convert", "tokens", "selftest", "remote", "service"} <= commands, "commands in --help: %s" % sorted(commands))
    section = readme_configuration()
    check(not [c for c in commands if "| `%s" % c not in section],
          "commands of `etwd --help` without a row in README's Configuration: %s"
          % sorted(c for c in commands if "| `%s" % c not in section))
    done()


if __name__ == "__main__":
    main()
