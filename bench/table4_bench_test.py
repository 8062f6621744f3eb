#!/usr/bin/python3
"""table4_bench.py's eager PyTorch side without PyTorch or a GPU: stand-ins
for `torch` and `torch_h3` that only count calls, enough to run
Sides.torch_h3 and Sides.torch_h3_latency end to end. On the first GPU run
Sides.torch_h3 was the torch_h3 module (an attribute of that name hid the
method): "'module' object is not callable"."""
import argparse
import contextlib
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class FakeTensor:
    """Slicing, argmax and .cuda() return a tensor again; nothing computes."""

    def __getitem__(self, index):
        return self

    def argmax(self, dim):
        return self

    def cuda(self):
        return self


class FakeDecoder:
    made = []

    def __init__(self, weights, cfg, batch, capacity, device, dtype):
        self.batch, self.steps = batch, 0
        FakeDecoder.made.append(self)

    def prefill(self, prompts):
        return FakeTensor()

    def step(self, tokens):
        self.steps += 1
        return FakeTensor()


def fake_torch():
    generator = types.SimpleNamespace(manual_seed=lambda seed: generator)
    cuda = types.SimpleNamespace(synchronize=lambda: None, empty_cache=lambda: None)
    return types.SimpleNamespace(
        float16="fp16", bfloat16="bf16", cuda=cuda,
        Generator=lambda: generator, randint=lambda *a, **k: FakeTensor(),
        inference_mode=contextlib.nullcontext)


def fake_torch_h3():
    return types.SimpleNamespace(
        random_weights=lambda cfg, vocab: {}, to_device=lambda w, device, dtype: w,
        Decoder=FakeDecoder)


class EagerSideTest(unittest.TestCase):
    def setUp(self):
        self.saved = {name: sys.modules.get(name) for name in ("torch", "torch_h3")}
        sys.modules["torch"] = fake_torch()
        sys.modules["torch_h3"] = fake_torch_h3()
        import table4_bench
        self.bench = table4_bench
        FakeDecoder.made = []

    def tearDown(self):
        for name, module in self.saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module

    def sides(self, reps):
        args = argparse.Namespace(dtype="fp16", sides="engine,torch_h3", batch=4,
                                  new_tokens=3, reps=reps, own_gpt2=False)
        return self.bench.Sides(args, sys.modules["torch"])

    def test_throughput_runs_warm_up_and_reps(self):
        result = self.sides(reps=2).torch_h3(16)
        self.assertEqual(len(result["total_s"]), 2)
        self.assertEqual(len(result["prefill_s"]), 2)
        self.assertEqual(len(FakeDecoder.made), 3)  # one untimed warm-up
        self.assertTrue(all(d.steps == 3 and d.batch == 4 for d in FakeDecoder.made))

    def test_latency_times_each_step_at_batch_one(self):
        result = self.sides(reps=1).torch_h3_latency(16, 5)
        self.assertEqual(len(result["step_ms"]), 5)
        self.assertTrue(all(d.batch == 1 for d in FakeDecoder.made))


class RatiosTest(unittest.TestCase):
    """table4_floor.ratios: a second engine configuration (--engine-flags)
    is compared with the default one and with the issue's floor."""

    def test_flagged_engine_ratios(self):
        import table4_floor
        row = dict(h3serve_graphs_on=dict(median_tokens_per_s=4000.0),
                   h3serve_flagged_graphs_on=dict(median_tokens_per_s=10000.0),
                   floor=dict(issue_h100_tokens_per_s=20000.0))
        out = table4_floor.ratios(row)
        self.assertAlmostEqual(out["h3serve_flagged_over_h3serve"], 2.5)
        self.assertAlmostEqual(out["flagged_fraction_of_issue_h100_floor"], 0.5)
        self.assertAlmostEqual(out["fraction_of_issue_h100_floor"], 0.2)
        # A flagged run that failed is recorded with its error, no ratio.
        row["h3serve_flagged_graphs_on"] = dict(flags="--pdl on", error="exit 1")
        self.assertNotIn("h3serve_flagged_over_h3serve", table4_floor.ratios(row))
        self.assertAlmostEqual(table4_floor.ratios(row)["fraction_of_issue_h100_floor"], 0.2)
        del row["h3serve_flagged_graphs_on"]
        self.assertNotIn("h3serve_flagged_over_h3serve", table4_floor.ratios(row))


if __name__ == "__main__":
    unittest.main()
