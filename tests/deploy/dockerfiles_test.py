"""The Dockerfiles, checked without a Docker engine.

Their build steps go through scripts/install-deps.sh and scripts/build.sh
(the README's installer and scripts/serve.sh's build) and repeat no package
name; every COPY source exists in the build context; the exposed ports are
h3serve's defaults; the runtime stage runs as a non-root user with `h3
health` as its HEALTHCHECK, which this test runs against h3serve. The
install tree the runtime stage copies is made with `cmake --install` of this
build, and on Debian 12 the runtime package list is checked against what the
binaries load (ldd).
"""

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import unittest

import deploy_support as ds

DOCKERFILES = {"cpu": ds.DEPLOY_DIR / "Dockerfile.cpu",
               "cuda": ds.DEPLOY_DIR / "Dockerfile.cuda"}
INSTALL_DEPS = "scripts/install-deps.sh"
BUILD = "scripts/build.sh"


def instructions(path):
    """[(stage index, INSTRUCTION, arguments)] of a Dockerfile: comments
    dropped, continuation lines joined; ARGs before the first FROM have stage
    -1."""
    text = re.sub(r"\\\n", " ", path.read_text())
    result, stage = [], -1
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM":
            stage += 1
        result.append((stage, word.upper(), " ".join(rest.split())))
    return result


def global_args(steps):
    """ARG defaults declared before the first FROM."""
    return dict(a.split("=", 1) for s, i, a in steps if s == -1 and i == "ARG")


def package_names():
    """Every package name in scripts/install-deps.sh's lists."""
    text = (ds.SOURCE_DIR / INSTALL_DEPS).read_text()
    names = set()
    for body in re.findall(r"^\w+_packages\w*=\((.*?)^\)", text, re.M | re.S):
        for line in body.splitlines():
            names.update(line.split("#")[0].split())
    return names


def dockerignore_patterns():
    lines = (ds.SOURCE_DIR / ".dockerignore").read_text().splitlines()
    return [l.strip() for l in lines if l.strip() and not l.startswith("#")]


class DockerfilesTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.steps = {k: instructions(p) for k, p in DOCKERFILES.items()}
        cls.defaults = ds.h3serve_defaults()

    def stages(self, kind):
        """[(FROM arguments, [(INSTRUCTION, arguments)])] per stage."""
        stages = []
        for stage, instruction, args in self.steps[kind]:
            if instruction == "FROM":
                stages.append((args, []))
            elif stage >= 0:
                stages[-1][1].append((instruction, args))
        return stages

    def test_two_stages_build_then_runtime(self):
        expected = {
            "cpu": ("debian:bookworm", "debian:bookworm-slim"),
            "cuda": ("nvidia/cuda:{v}-devel-ubuntu24.04",
                     "nvidia/cuda:{v}-runtime-ubuntu24.04"),
        }
        for kind, (build, runtime) in expected.items():
            with self.subTest(kind=kind):
                stages = self.stages(kind)
                self.assertEqual(len(stages), 2)
                version = global_args(self.steps[kind]).get("CUDA_VERSION")
                images = [f.split(" AS ")[0].replace("${CUDA_VERSION}", version or "")
                          for f, _ in stages]
                self.assertEqual(images, [build.format(v=version),
                                          runtime.format(v=version)])
                self.assertTrue(stages[0][0].endswith(" AS build"))
        self.assertRegex(global_args(self.steps["cuda"])["CUDA_VERSION"],
                         r"^12\.\d+\.\d+$")

    def test_packages_come_from_the_installer_only(self):
        names = package_names()
        self.assertIn("libgrpc++-dev", names)
        self.assertIn("libgrpc++1.51", names)
        for kind, path in DOCKERFILES.items():
            with self.subTest(kind=kind):
                text = path.read_text()
                runs = [a for _, i, a in self.steps[kind] if i == "RUN"]
                self.assertFalse([r for r in runs if re.search(
                    r"\b(apt|apt-get|dpkg)\s+(-\S+\s+)*(install|-i)\b", r)])
                words = set(re.findall(r"[\w.+-]+", "\n".join(
                    l for l in text.splitlines() if not l.startswith("#"))))
                self.assertEqual(words & names, set())
                build, runtime = self.stages(kind)
                build_runs = [a for i, a in build[1] if i == "RUN"]
                self.assertTrue(any(INSTALL_DEPS in r for r in build_runs))
                self.assertTrue(any(re.search(BUILD + r" --install /opt/h3serve\b", r)
                                    for r in build_runs))
                self.assertTrue(any(re.search(r"install-deps\.sh --runtime\b", a)
                                    for i, a in runtime[1] if i == "RUN"))
                preset = re.search(r"H3_PRESET=(\w+)", " ".join(build_runs)).group(1)
                self.assertEqual(preset, kind)

    def test_build_steps_are_the_readmes(self):
        build = (ds.SOURCE_DIR / BUILD).read_text()
        serve = (ds.SOURCE_DIR / "scripts/serve.sh").read_text()
        readme = (ds.SOURCE_DIR / "README.md").read_text()
        self.assertRegex(build, r"(?m)^scripts/install-deps\.sh$")
        self.assertRegex(build, r"cmake --install")
        self.assertRegex(serve, r"(?m)^scripts/build\.sh$")
        self.assertIn("scripts/serve.sh", readme)
        self.assertIn(INSTALL_DEPS, readme)

    def test_copy_sources_exist_in_the_build_context(self):
        ignored = dockerignore_patterns()
        for kind in DOCKERFILES:
            stage_names = []
            for from_args, steps in self.stages(kind):
                for instruction, args in steps:
                    if instruction != "COPY":
                        continue
                    words = shlex.split(args)
                    options = [w for w in words if w.startswith("--")]
                    sources = [w for w in words if not w.startswith("--")][:-1]
                    source_stage = [o.split("=", 1)[1] for o in options
                                    if o.startswith("--from=")]
                    with self.subTest(kind=kind, copy=args):
                        self.assertTrue(sources)
                        if source_stage:
                            self.assertIn(source_stage[0], stage_names)
                            continue
                        for source in sources:
                            self.assertTrue(
                                (ds.SOURCE_DIR / source).exists(), source)
                            self.assertFalse(any(fnmatch.fnmatch(source, p)
                                                 for p in ignored), source)
                if " AS " in from_args:
                    stage_names.append(from_args.split(" AS ")[1])

    def test_exposed_ports_are_the_servers_defaults(self):
        for kind in DOCKERFILES:
            with self.subTest(kind=kind):
                exposed = {int(p) for _, i, a in self.steps[kind]
                           if i == "EXPOSE" for p in a.split()}
                self.assertEqual(exposed, {int(self.defaults["--port"]),
                                           int(self.defaults["--http-port"]),
                                           int(self.defaults["--metrics-port"])})

    def test_runtime_stage_runs_h3serve_as_non_root(self):
        for kind in DOCKERFILES:
            with self.subTest(kind=kind):
                runtime = dict(self.stages(kind)[-1][1])
                self.assertNotIn(runtime["USER"].split(":")[0], ("0", "root"))
                self.assertEqual(json.loads(runtime["ENTRYPOINT"])[0], "h3serve")
                self.assertIn("/opt/h3serve/bin", runtime["ENV"])

    def healthcheck(self, kind):
        """(Docker's --timeout in seconds, the command's argv)."""
        args = dict(self.stages(kind)[-1][1])["HEALTHCHECK"]
        timeout = re.search(r"--timeout=(\d+)s", args).group(1)
        command = re.search(r"CMD (\[.*\])$", args).group(1)
        return int(timeout), json.loads(command)

    def test_healthcheck_runs_h3_health_against_h3serve(self):
        tmp = tempfile.mkdtemp(prefix="h3-healthcheck-")
        server = ds.H3Serve(["--model", ds.make_model(tmp)])
        try:
            for kind in DOCKERFILES:
                with self.subTest(kind=kind):
                    docker_timeout, argv = self.healthcheck(kind)
                    self.assertEqual(argv[:2], ["h3", "health"])
                    flags = dict(zip(argv[2::2], argv[3::2]))
                    self.assertLess(float(flags["--timeout"]), docker_timeout)
                    # Inside the container it asks localhost at the default
                    # port; here the server listens on a free one.
                    self.assertNotIn("--server", flags)
                    code, out = ds.run([ds.H3] + argv[1:] +
                                       ["--server", server.address], check=False)
                    self.assertEqual((code, out), (0, "SERVING\n"))
        finally:
            server.stop()
            shutil.rmtree(tmp, ignore_errors=True)

    def test_install_tree_is_what_the_runtime_stage_copies(self):
        prefix = tempfile.mkdtemp(prefix="h3-install-")
        try:
            ds.run(["cmake", "--install", str(ds.BUILD_DIR), "--prefix", prefix])
            module = [f for f in os.listdir(os.path.join(prefix, "lib", "h3"))]
            self.assertEqual(len(module), 1)
            self.assertTrue(module[0].startswith("libh3_sentencepiece_module"))
            for binary in ("h3serve", "h3"):
                path = os.path.join(prefix, "bin", binary)
                code, out = ds.run([path, "--version"])
                self.assertIn("commit", out)
            # The installed h3 finds the installed module (bin/../lib/h3/)
            # before the build tree's: the loader's log names the file.
            spm = str(ds.SOURCE_DIR / "tokenizer/testdata/spm/h3_test.model")
            env = {k: v for k, v in os.environ.items()
                   if k != "H3_SENTENCEPIECE_MODULE"}
            env["LD_DEBUG"] = "files"
            done = subprocess.run([os.path.join(prefix, "bin", "h3"), "tokenize",
                                   "--tokenizer", spm, "hello"], env=env,
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 0, done.stderr[-2000:])
            self.assertRegex(done.stdout, r"^\[\d+(,\d+)*\]\n$")
            self.assertIn("file=" + os.path.join(prefix, "lib", "h3", module[0]),
                          done.stderr)
        finally:
            shutil.rmtree(prefix, ignore_errors=True)

    @unittest.skipUnless(
        re.search(r"VERSION_CODENAME=bookworm", open("/etc/os-release").read()),
        "the runtime list checked against ldd is Debian 12's")
    def test_runtime_packages_are_what_the_binaries_load(self):
        module_dir = ds.BUILD_DIR / "lib" / "h3"
        binaries = [ds.H3SERVE, ds.H3] + [str(p) for p in module_dir.iterdir()]
        libraries = set()
        for binary in binaries:
            _, out = ds.run(["ldd", binary])
            self.assertNotIn("not found", out)
            libraries.update(re.findall(r"=> (/\S+)", out))
        # A CUDA build also loads the CUDA runtime from the toolkit, which no
        # Debian package owns: the nvidia/cuda runtime image provides it.
        libraries = {l for l in libraries
                     if not os.path.realpath(l).startswith("/usr/local/cuda")}
        # dpkg may know a library by its /lib path or by its real one: ask
        # for both in one call (it fails for the unknown ones, and says so).
        paths = libraries | {os.path.realpath(l) for l in libraries}
        _, out = ds.run(["dpkg", "-S"] + sorted(paths), check=False)
        package_of = {path: package for package, path in
                      re.findall(r"(?m)^([^:\s,]+)\S*: (/\S+)$", out)}
        owners = {}
        for library in libraries:
            owner = (package_of.get(os.path.realpath(library)) or
                     package_of.get(library))
            self.assertIsNotNone(owner, f"no package owns {library}")
            owners[library] = owner
        _, out = ds.run([os.path.join(ds.SOURCE_DIR, INSTALL_DEPS),
                         "--print", "--runtime"])
        listed = set(out.split())

        # What a runtime stage gets: the list, what it pulls in, and the
        # packages of priority required that every Debian image has. One
        # dpkg-query for every installed package's priority and dependencies.
        _, out = ds.run(["dpkg-query", "-W",
                         "-f=${Package}\t${Priority}\t${Depends}\n"])
        depends, available = {}, set()
        for line in out.splitlines():
            package, priority, deps = line.split("\t")
            depends[package] = {d.split()[0].split(":")[0]
                                for d in re.split(r"[,|]", deps) if d.strip()}
            if priority == "required":
                available.add(package)
        todo = list(listed)
        while todo:
            package = todo.pop()
            if package not in available:
                available.add(package)
                todo.extend(depends.get(package, ()))
        for library, package in sorted(owners.items()):
            self.assertIn(package, available, library)
        # And nothing listed that no binary loads.
        self.assertEqual(listed - set(owners.values()), set())


if __name__ == "__main__":
    unittest.main(verbosity=2)
