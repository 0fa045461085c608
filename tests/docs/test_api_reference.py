#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""CTest docs_api_reference: the Doxygen API reference of the installed headers builds without a
single warning (docs/library.md, "API reference").

    test_api_reference.py DOXYGEN BUILD_DIR SOURCE_DIR

1. Runs DOXYGEN on BUILD_DIR/docs/Doxyfile (configured by cmake/AnvilApiDocs.cmake) and fails
   on a non-zero exit or any warning, listing them all.
2. Checks the output: BUILD_DIR/docs/api/html, nothing new in the source tree, a class page that
   names its header as a consumer includes it and carries the header's comment (which only the
   filter scripts/doxygen_filter.py makes visible to Doxygen).
3. Shows the check can fail: the same configuration over a scratch header with a bad comment
   (an unknown command, an unknown HTML tag) must exit non-zero naming the header's line.
A missing doxygen fails the test, naming the Debian package.
"""
import os
import subprocess
import sys
import tempfile


def run_doxygen(doxygen, config_text, cwd):
    """Doxygen with the configuration on stdin (`doxygen -`); returns (exit status, stderr)."""
    proc = subprocess.run([doxygen, "-"], input=config_text, cwd=cwd, capture_output=True,
                          text=True, check=False)
    return proc.returncode, proc.stderr


def listing(folder):
    return sorted(os.listdir(folder))


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: test_api_reference.py DOXYGEN BUILD_DIR SOURCE_DIR")
    doxygen, build, source = sys.argv[1:]
    if not doxygen or doxygen.endswith("NOTFOUND") or not os.path.exists(doxygen):
        sys.exit("docs_api_reference: doxygen not found (CMake's ANVIL_DOXYGEN = "
                 f"'{doxygen}'); install the Debian package doxygen (scripts/install_deps.sh) "
                 "and re-run cmake")
    docs = os.path.join(build, "docs")
    with open(os.path.join(docs, "Doxyfile"), encoding="utf-8") as f:
        config = f.read()
    failures = []

    # 1. The real run: no warning at all.
    before = {d: listing(os.path.join(source, d)) for d in (".", "docs")}
    rc, err = run_doxygen(doxygen, config, docs)
    warnings = [line for line in err.splitlines() if line.strip()]
    if rc != 0 or warnings:
        failures.append(f"doxygen exited {rc} with {len(warnings)} warning line(s):\n  " +
                        "\n  ".join(warnings[:200]))

    # 2. Where the output went and what it holds.
    html = os.path.join(docs, "api", "html")
    page = os.path.join(html, "classanvil_1_1optim_1_1SGD.html")
    if not os.path.isfile(os.path.join(html, "index.html")):
        failures.append(f"no {html}/index.html")
    elif not os.path.isfile(page):
        failures.append(f"no page for anvil::optim::SGD ({page})")
    else:
        with open(page, encoding="utf-8") as f:
            text = f.read()
        if "anvil/engine/optim/optimizer.h" not in text:
            failures.append("the SGD page does not name <anvil/engine/optim/optimizer.h>")
        if "fold it into a GEMM" not in text:
            failures.append("the SGD page lacks the comment of SGD::fold_into_backward: the "
                            "header comments did not reach Doxygen (scripts/doxygen_filter.py)")
    after = {d: listing(os.path.join(source, d)) for d in (".", "docs")}
    if after != before:
        failures.append(f"the run changed the source tree: {before} -> {after}")

    # 3. A planted fault must fail.
    with tempfile.TemporaryDirectory(prefix="anvil_doxygen_") as tmp:
        header = os.path.join(tmp, "planted.h")
        with open(header, "w", encoding="utf-8") as f:
            f.write("// SPDX-License-Identifier: Apache-2.0\n#pragma once\n\n"
                    "// Takes a <bogus> tag and an \\unknowncommand.\n"
                    "int planted(int x);\n")
        planted = config + (f'\nINPUT = "{header}"\nOUTPUT_DIRECTORY = "{tmp}/out"\n'
                            f"STRIP_FROM_PATH = {tmp}\nSTRIP_FROM_INC_PATH = {tmp}\n")
        rc, err = run_doxygen(doxygen, planted, tmp)
        if rc == 0 or "planted.h:4" not in err:
            failures.append(f"a header with a bad comment passed (exit {rc}): {err.strip()!r}")

    if failures:
        print("docs_api_reference: FAILED\n- " + "\n- ".join(failures))
        return 1
    print(f"docs_api_reference: no warnings; reference in {html}/index.html; a planted bad "
          "comment fails the run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
