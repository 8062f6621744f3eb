#!/usr/bin/python3
"""scripts/gpu-pack.sh on this build, without a GPU: packs the h3 program
(the CPU side works in any build; a gpu test that declares DATA joins it
when the build has one), unpacks into an empty folder, and checks that the
archive holds every library `ldd` lists (less glibc's and CUDA's), that h3
runs from it with nothing but LD_LIBRARY_PATH set and loads those libraries
from the archive, the manifest, the scripts with what they import, the
declared test data, and the refusal over --max-mb.

Environment: H3_SOURCE_DIR, H3_BUILD_DIR, H3_BIN (ctest sets them)."""
import ast
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

SOURCE = os.environ["H3_SOURCE_DIR"]
BUILD = os.environ["H3_BUILD_DIR"]
H3 = os.environ["H3_BIN"]
PACK = os.path.join(SOURCE, "scripts", "gpu-pack.sh")
GLIBC = re.compile(r"^(ld-linux.*|libc|libm|libmvec|libdl|libpthread|librt|libresolv|libutil|"
                   r"libanl|libnsl|libBrokenLocale|libthread_db|libnss_\w+)\.so")
CUDA = re.compile(r"^lib(cuda|cudart|cufft|cufftw|cublas|cublasLt|curand|cusolver|cusparse|"
                  r"nvrtc|nvrtc-builtins|nvJitLink|nvidia-[a-z-]+|cupti|nvToolsExt)\.so")


def ldd(path, env=None):
    """{soname: resolved path or None} as ldd reports it."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True,
                         env=env).stdout
    libs = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[1] == "=>":
            libs[fields[0]] = None if fields[2] == "not" else fields[2]
    return libs


def gpu_check_list():
    with open(os.path.join(BUILD, "gpu_check_files.txt")) as f:
        return [line.split() for line in f if line.strip()]


class GpuPackTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpu_pack_test.")
        # A gpu test with declared data, when this build has one.
        data = [(f[1], f[2]) for f in gpu_check_list() if f[0] == "data" and os.path.exists(f[2])]
        cls.data = data[:1]
        only = ["h3"] + [os.path.basename(test) for _, test in cls.data]
        cls.archive = os.path.join(cls.tmp, "h3-gpu.tar.xz")
        cls.pack = subprocess.run(
            [PACK, "--no-build", "--only", ",".join(only), "--xz-level", "0", BUILD, cls.archive],
            capture_output=True, text=True, timeout=300)
        cls.unpacked = os.path.join(cls.tmp, "unpacked")
        os.makedirs(cls.unpacked)
        if cls.pack.returncode == 0:
            subprocess.run(["tar", "-xJf", cls.archive, "-C", cls.unpacked], check=True)
        cls.root = os.path.join(cls.unpacked, "h3-gpu")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def setUp(self):
        self.assertEqual(self.pack.returncode, 0, self.pack.stderr)

    def manifest(self):
        with open(os.path.join(self.root, "MANIFEST.json")) as f:
            return json.load(f)

    def test_archive_holds_the_libraries_ldd_lists(self):
        want = {name for name in ldd(H3) if not GLIBC.match(name) and not CUDA.match(name)}
        self.assertTrue(want, "h3 links shared libraries of its own")
        self.assertEqual(set(os.listdir(os.path.join(self.root, "lib"))), want)
        listed = {e["path"] for e in self.manifest()["files"] if e["kind"] == "library"}
        self.assertEqual(listed, {f"lib/{name}" for name in want})
        machine = {name for name in ldd(H3) if CUDA.match(name)}
        self.assertLessEqual(machine, set(self.manifest()["machine_libraries"]))

    def test_h3_runs_from_the_archive_with_only_ld_library_path(self):
        h3 = os.path.join(self.root, "build", "clients", "h3")
        env = {"LD_LIBRARY_PATH": os.path.join(self.root, "lib")}
        run = subprocess.run([h3, "--version"], env=env, capture_output=True, text=True,
                             timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertTrue(run.stdout.startswith("h3 "), run.stdout)
        # Every library it loads that the archive has comes from the archive.
        for name, path in ldd(h3, env=env).items():
            if GLIBC.match(name) or CUDA.match(name):
                continue
            self.assertEqual(os.path.dirname(path), os.path.join(self.root, "lib"), name)

    def test_manifest_names_the_build(self):
        m = self.manifest()
        commit = subprocess.run(["git", "-C", SOURCE, "rev-parse", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        if commit:
            self.assertEqual(m["commit"], commit)
        facts = dict((f[0], f[1] if len(f) > 1 else "") for f in gpu_check_list())
        self.assertEqual(m["build"]["type"], facts["build_type"])
        self.assertEqual(m["build"]["cuda_architectures"],
                         [a for a in facts.get("cuda_architectures", "").split(",") if a])
        self.assertRegex(m["glibc_required"], r"^2\.\d+$")
        for entry in m["files"]:
            path = os.path.join(self.root, entry["path"])
            size = (os.path.getsize(path) if os.path.isfile(path) else
                    sum(os.path.getsize(os.path.join(d, n))
                        for d, _, names in os.walk(path) for n in names))
            self.assertEqual(entry["bytes"], size, entry["path"])
        self.assertGreater(m["bytes"]["unpacked"], m["bytes"]["library"])
        with open(os.path.join(self.root, "build", "gpu_check_files.txt")) as f:
            lines = f.read().splitlines()
        self.assertIn("tool clients/h3", lines)
        self.assertIn(f"commit {m['commit']}", lines)

    def test_scripts_travel_with_what_they_import(self):
        self.assertTrue(os.access(os.path.join(self.root, "scripts", "gpu-check.sh"), os.X_OK))
        local = {}
        for folder in ("bench", os.path.join("tests", "reference")):
            for name in os.listdir(os.path.join(SOURCE, folder)):
                if name.endswith(".py"):
                    local[name[:-3]] = folder
        packed = [os.path.join(d, n) for d, _, names in os.walk(self.root)
                  for n in names if n.endswith(".py")]
        self.assertIn(os.path.join(self.root, "bench", "table4_bench.py"), packed)
        for script in packed:
            with open(script) as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
                for name in names:
                    if name in local:
                        self.assertTrue(os.path.exists(os.path.join(
                            self.root, local[name], name + ".py")),
                            f"{script} imports {name}, which the archive lacks")

    def test_declared_test_data_is_packed(self):
        if not self.data:
            self.skipTest("this build has no gpu test that declares DATA")
        for rel, _ in self.data:
            packed = os.path.join(self.root, rel)
            self.assertTrue(os.path.exists(packed), rel)
            self.assertEqual(sorted(os.listdir(packed)) if os.path.isdir(packed) else None,
                             sorted(os.listdir(os.path.join(SOURCE, rel)))
                             if os.path.isdir(packed) else None)

    def test_refuses_past_the_size_limit(self):
        out = os.path.join(self.tmp, "too-big.tar.xz")
        run = subprocess.run([PACK, "--no-build", "--only", "h3", "--xz-level", "0",
                              "--max-mb", "1", BUILD, out],
                             capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 1)
        self.assertIn("refused", run.stderr)
        self.assertIn("over --max-mb 1", run.stderr)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
