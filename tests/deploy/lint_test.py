"""The Dockerfiles pass a linter and build offline.

hadolint is no Debian package; the linter here is the npm package
dockerfile-utils (`dockerfile-utils lint`: instruction syntax, flags,
ports, durations, stage references, deprecated instructions), pinned in
tests/deploy/node/package-lock.json and installed by
`scripts/install-deps.sh --test`. It is the only check of
deploy/Dockerfile.cuda short of building it, which needs NVIDIA's CUDA
images from a registry (scripts/deploy-check.sh builds the CPU image).

A `# syntax=` directive makes BuildKit fetch that frontend image from a
registry before anything else: the Dockerfiles go without one, so that
they build where no registry is reachable (Docker 20.10's built-in frontend
has RUN --mount).
"""

import glob
import os
import shutil
import subprocess
import tempfile
import unittest

import deploy_support as ds

LINT = ds.SOURCE_DIR / "tests/deploy/node/node_modules/.bin/dockerfile-utils"
DOCKERFILES = sorted(glob.glob(str(ds.DEPLOY_DIR / "Dockerfile.*")))


def lint(path):
    """(exit code, output) of dockerfile-utils lint PATH."""
    if shutil.which("node") is None or not LINT.exists():
        raise AssertionError("needs node and tests/deploy/node/node_modules "
                             "(scripts/install-deps.sh --test runs npm ci)")
    done = subprocess.run([str(LINT), "lint", str(path)], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=60)
    return done.returncode, done.stdout


class LintTest(unittest.TestCase):

    def test_the_dockerfiles_are_clean(self):
        self.assertEqual([os.path.basename(p) for p in DOCKERFILES],
                         ["Dockerfile.cpu", "Dockerfile.cuda", "Dockerfile.prometheus"])
        for path in DOCKERFILES:
            with self.subTest(path=os.path.basename(path)):
                self.assertEqual(lint(path), (0, ""))

    def test_the_linter_finds_errors(self):
        # Dockerfile.cpu with a bad port and a bad health check interval.
        text = (ds.DEPLOY_DIR / "Dockerfile.cpu").read_text()
        text = text.replace("EXPOSE 50051", "EXPOSE grpc").replace(
            "--interval=10s", "--interval=10x")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "Dockerfile")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            code, out = lint(path)
        self.assertEqual(code, 1)
        self.assertIn("Invalid containerPort: grpc", out)
        self.assertIn("unknown unit x", out)

    def test_no_syntax_directive(self):
        for path in DOCKERFILES:
            with self.subTest(path=os.path.basename(path)):
                with open(path, encoding="utf-8") as f:
                    first = f.readline()
                self.assertNotRegex(first.lower(), r"^#\s*syntax\s*=")


if __name__ == "__main__":
    unittest.main(verbosity=2)
