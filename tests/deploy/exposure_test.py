"""Where the deployments listen and who can reach them.

h3serve listens on --host, loopback unless told otherwise, and /metrics
follows --host (there is no separate flag for it; if one appears, the
deployments must pass it too). Inside a container loopback is unreachable,
so the images, compose and the Kubernetes Deployment pass `--host 0.0.0.0`
explicitly, each flag once (h3serve refuses a repeated flag), and the
command lines they make start a real h3serve. On the host, compose publishes
every port on 127.0.0.1 unless H3_PUBLISH_ADDRESS says otherwise, and
Grafana has no default password and no anonymous access.
"""

import json
import re
import shutil
import tempfile
import unittest

import deploy_support as ds

PORT_FLAGS = ("--port", "--http-port", "--metrics-port")


def entrypoint(dockerfile):
    """The exec-form ENTRYPOINT of a Dockerfile, as a list."""
    text = (ds.DEPLOY_DIR / dockerfile).read_text()
    return json.loads(re.findall(r"^ENTRYPOINT (\[.*\])$", text, re.M)[-1])


def flags_of(argv):
    """The --flags of an argument list."""
    return [a for a in argv if a.startswith("--")]


class ExposureTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.defaults = ds.h3serve_defaults()
        cls.compose = ds.load_yaml_documents(
            ds.DEPLOY_DIR / "docker-compose.yml")[0]["services"]
        deployment = ds.load_yaml_documents(
            ds.DEPLOY_DIR / "kubernetes/deployment.yaml")[0]
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        h3serve = cls.compose["h3serve"]
        cls.command_lines = {
            "Dockerfile.cpu": entrypoint("Dockerfile.cpu"),
            "Dockerfile.cuda": entrypoint("Dockerfile.cuda"),
            "docker-compose.yml": (h3serve.get("entrypoint", ["h3serve"]) +
                                   h3serve.get("command", [])),
            "kubernetes/deployment.yaml": (container.get("command", ["h3serve"]) +
                                           container.get("args", [])),
        }
        cls.tmp = tempfile.mkdtemp(prefix="h3-exposure-")
        cls.model = ds.make_model(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_every_deployment_listens_on_all_interfaces(self):
        listen_flags = ["--host"] + [f for f in self.defaults
                                     if re.fullmatch(r"--[\w-]*-host", f)]
        for name, argv in self.command_lines.items():
            with self.subTest(name=name):
                self.assertEqual(argv[0], "h3serve")
                for flag in listen_flags:
                    self.assertIn(flag, argv)
                    self.assertEqual(argv[argv.index(flag) + 1], "0.0.0.0", flag)
                flags = flags_of(argv)
                self.assertEqual(len(flags), len(set(flags)), "a flag repeated")

    def test_the_command_lines_start_h3serve(self):
        # Each command line as written, with loopback and free ports in place
        # of 0.0.0.0 and the fixed ports (given where it leaves them to the
        # defaults): every flag it uses must exist, none may repeat.
        for name, argv in self.command_lines.items():
            with self.subTest(name=name):
                args = list(argv[1:])
                for i in range(len(args) - 1):
                    if args[i] == "--host":
                        args[i + 1] = "127.0.0.1"
                    elif args[i] in PORT_FLAGS:
                        args[i + 1] = "0"
                args += [a for f in PORT_FLAGS if f not in args for a in (f, "0")]
                server = ds.H3Serve(args + ["--model", self.model], listen=False)
                try:
                    self.assertIn("127.0.0.1:", server.address)
                finally:
                    self.assertEqual(server.stop(), 0)

    def test_compose_publishes_on_loopback_by_default(self):
        for service, spec in self.compose.items():
            for port in spec.get("ports", []):
                with self.subTest(service=service, port=port):
                    address = port.rsplit(":", 2)[0]
                    self.assertEqual(address, "${H3_PUBLISH_ADDRESS:-127.0.0.1}")

    def test_grafana_has_no_default_password_nor_anonymous_access(self):
        grafana = self.compose["grafana"]
        env = grafana["environment"]
        self.assertIn("GF_SECURITY_ADMIN_PASSWORD__FILE", env)
        self.assertEqual(env["GF_AUTH_ANONYMOUS_ENABLED"], "false")
        self.assertNotIn("GF_SECURITY_ADMIN_PASSWORD", env)
        secret = env["GF_SECURITY_ADMIN_PASSWORD__FILE"]
        self.assertTrue(secret.startswith("/run/secrets/"))
        name = secret.rsplit("/", 1)[1]
        self.assertIn(name, grafana["secrets"])
        compose = ds.load_yaml_documents(ds.DEPLOY_DIR / "docker-compose.yml")[0]
        source = compose["secrets"][name]["file"]
        path = "deploy/" + source.removeprefix("./")
        # Never committed, never in an image's build context.
        self.assertIn("/" + path, (ds.SOURCE_DIR / ".gitignore").read_text().split())
        self.assertIn(path, (ds.SOURCE_DIR / ".dockerignore").read_text().split())
        self.assertNotIn("admin", [v for k, v in env.items() if "PASSWORD" in k])


if __name__ == "__main__":
    unittest.main(verbosity=2)
