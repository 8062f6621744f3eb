#!/usr/bin/python3
"""scripts/gpu-variants.py on a fake CUDA build: a build.ninja and a
rules.ninja whose compiler and linker are stand-ins that log their
arguments and write their outputs. Checks the overlays (a folder, files
at a git revision), the compile command (the overlay's folder first on the
include path, the overlay's copy of the source), the link command (the
variant's object in place of the source's, or ahead of the libraries), the
archive and its manifest, and the refusals.

Environment: H3_SOURCE_DIR (ctest sets it)."""
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import textwrap
import unittest

SOURCE = os.environ["H3_SOURCE_DIR"]
TOOL = os.path.join(SOURCE, "scripts", "gpu-variants.py")
CU = "kernels/cuda/h3_step.cu"  # any CUDA source of the tree


def write(path, text, executable=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    if executable:
        os.chmod(path, 0o755)


class GpuVariantsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpu_variants_test.")
        self.build = os.path.join(self.tmp, "build")
        self.log = os.path.join(self.tmp, "log")
        # Stand-ins: record the arguments, write the file after -o.
        tool = textwrap.dedent(f"""\
            #!/bin/sh
            echo "$(basename "$0") $*" >> {self.log}
            while [ $# -gt 0 ]; do
              if [ "$1" = -o ]; then echo built > "$2"; fi
              shift
            done
            """)
        write(os.path.join(self.tmp, "bin", "fake-nvcc"), tool, True)
        write(os.path.join(self.tmp, "bin", "fake-c++"), tool, True)
        bindir = os.path.join(self.tmp, "bin")
        write(os.path.join(self.build, "CMakeFiles", "rules.ninja"), textwrap.dedent(f"""\
            rule CUDA_COMPILER__lib_Release
              depfile = $DEP_FILE
              command = {bindir}/fake-nvcc -forward-unknown-to-host-compiler $DEFINES $INCLUDES $FLAGS -MD -MT $out -MF $DEP_FILE -x cu -c $in -o $out
              description = Building CUDA object $out

            rule CXX_EXECUTABLE_LINKER__bench_Release
              command = $PRE_LINK && {bindir}/fake-c++ $FLAGS $LINK_FLAGS $in -o $TARGET_FILE $LINK_PATH $LINK_LIBRARIES && $POST_BUILD

            rule CXX_EXECUTABLE_LINKER__test_Release
              command = $PRE_LINK && {bindir}/fake-c++ $FLAGS $LINK_FLAGS $in -o $TARGET_FILE $LINK_PATH $LINK_LIBRARIES && $POST_BUILD
            """))
        write(os.path.join(self.build, "build.ninja"), textwrap.dedent(f"""\
            build kernels/step.cu.o: CUDA_COMPILER__lib_Release {SOURCE}/{CU} || order
              DEFINES = -DONE
              INCLUDES = -I{SOURCE} -isystem=/usr/local/cuda/include
              FLAGS = -O2 $
                  -std=c++17
            build bench/step_bench: CXX_EXECUTABLE_LINKER__bench_Release bench/main.o | kernels/libk.a || dep
              FLAGS = -O2
              LINK_LIBRARIES = kernels/libk.a -lcudart
              LINK_PATH = -L/usr/local/cuda/lib
            build tests/own_test: CXX_EXECUTABLE_LINKER__test_Release tests/t.o kernels/step.cu.o
              FLAGS = -O2
              LINK_LIBRARIES = -lgtest
            """))
        self.out = os.path.join(self.tmp, "v.tar.xz")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def run_tool(self, *args):
        return subprocess.run(["/usr/bin/python3", TOOL, "--build", self.build, "--out", self.out,
                               "--source", CU] + list(args),
                              capture_output=True, text=True, timeout=60)

    def test_builds_each_variant_into_each_program(self):
        overlay = os.path.join(self.tmp, "six")
        write(os.path.join(overlay, "kernels", "cuda", "h3_step_device.cuh"), "// six\n")
        run = self.run_tool("--program", "bench/step_bench", "--program", "tests/own_test",
                            "--variant", "now=.", "--variant", f"six={overlay}",
                            "--variant", f"head=@HEAD:{CU}")
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(self.log) as f:
            calls = [line.split() for line in f]
        compiles = [c for c in calls if c[0] == "fake-nvcc"]
        links = [c for c in calls if c[0] == "fake-c++"]
        self.assertEqual((len(compiles), len(links)), (3, 6))
        # now: the tree's source, the build's include path.
        self.assertEqual(compiles[0][compiles[0].index("-c") + 1], f"{SOURCE}/{CU}")
        self.assertEqual(compiles[0][2:4], ["-DONE", f"-I{SOURCE}"])
        # six: the overlay first; it has no copy of the source, so the tree's.
        self.assertEqual(compiles[1][3:5], [f"-I{overlay}", f"-I{SOURCE}"])
        self.assertEqual(compiles[1][compiles[1].index("-c") + 1], f"{SOURCE}/{CU}")
        # head: the source as committed, from its overlay.
        source = compiles[2][compiles[2].index("-c") + 1]
        self.assertTrue(source.endswith(f"overlays/head/{CU}"), source)
        self.assertIn("-std=c++17", compiles[2])
        for c in compiles:
            self.assertEqual(c[-2], "-o")
        # The bench links the object ahead of its own (the source is in a
        # library); the test in place of the source's object.
        objects = {os.path.basename(c[c.index("-o") + 1]): c for c in links}
        bench = objects["step_bench_six"]
        self.assertEqual(bench[1:5], ["-O2", "-s", bench[3], "bench/main.o"])
        self.assertTrue(bench[3].endswith("six.o"))
        self.assertEqual(bench[-3:], ["-L/usr/local/cuda/lib", "kernels/libk.a", "-lcudart"])
        own = objects["own_test_head"]
        self.assertEqual(own[3:5], ["tests/t.o", own[4]])
        self.assertTrue(own[4].endswith("head.o"))
        self.assertNotIn("kernels/step.cu.o", own)
        with tarfile.open(self.out) as tar:
            names = sorted(tar.getnames())
            manifest = json.load(tar.extractfile("variants/MANIFEST.json"))
        self.assertEqual(names, ["variants", "variants/MANIFEST.json"] + sorted(
            f"variants/{p}_{v}" for p in ("step_bench", "own_test") for v in ("now", "six", "head")))
        self.assertEqual(manifest["source"], CU)
        self.assertEqual(manifest["variants"]["six"]["files"],
                         ["kernels/cuda/h3_step_device.cuh"])
        self.assertEqual(manifest["variants"]["head"], {"spec": f"@HEAD:{CU}", "files": [CU]})

    def test_dry_run_prints_the_commands_and_builds_nothing(self):
        run = self.run_tool("--program", "bench/step_bench", "--variant", "now=.", "--dry-run")
        self.assertEqual(run.returncode, 0, run.stderr)
        lines = run.stdout.splitlines()
        self.assertEqual(len(lines), 3)
        self.assertIn("fake-nvcc", lines[0])
        self.assertIn("fake-c++", lines[1])
        self.assertFalse(os.path.exists(self.log))
        self.assertFalse(os.path.exists(self.out))

    def test_refusals(self):
        for args, message in (
                (["--program", "bench/none", "--variant", "a=."], "links no program bench/none"),
                (["--program", "bench/step_bench", "--variant", "a"], "wants NAME=SPEC"),
                (["--program", "bench/step_bench", "--variant", "a=.", "--variant", "a=."],
                 "named twice"),
                (["--program", "bench/step_bench", "--variant", "a=@HEAD"], "@REV:PATH"),
                (["--program", "bench/step_bench", "--variant", "a=@HEAD:no/such.cu"],
                 "no no/such.cu at HEAD"),
                (["--program", "bench/step_bench", "--variant", "a=/no/such/dir"],
                 "no folder /no/such/dir")):
            run = self.run_tool(*args)
            self.assertEqual(run.returncode, 2, (args, run.stderr))
            self.assertIn(message, run.stderr)
        run = subprocess.run(["/usr/bin/python3", TOOL, "--build", self.build, "--source",
                              "kernels/cuda/none.cu", "--program", "bench/step_bench",
                              "--variant", "a=."], capture_output=True, text=True)
        self.assertEqual(run.returncode, 2)
        self.assertIn("compiles no kernels/cuda/none.cu", run.stderr)


if __name__ == "__main__":
    unittest.main()
