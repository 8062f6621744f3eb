"""Our own GPT-2-shaped decoder in eager PyTorch, with a preallocated KV
cache: the stand-in for Hugging Face's GPT2LMHeadModel in
bench/table4_bench.py where `transformers` is not installed. It is NOT the
paper's baseline and is reported under its own name.

The architecture of GPT-2 (learned positions, pre-norm blocks of causal
multi-head attention and a 4x GELU MLP, final norm, LM head tied to the
token embedding) with random weights (std 0.02), in one dtype. Greedy
generation: one batched prefill of the prompts, then one step per token.
"""
import math

import torch


class Gpt2Shaped(torch.nn.Module):
    def __init__(self, vocab, positions, d, n_layer, n_head):
        super().__init__()
        self.d, self.n_head = d, n_head
        self.wte = torch.nn.Embedding(vocab, d)
        self.wpe = torch.nn.Embedding(positions, d)
        self.blocks = torch.nn.ModuleList()
        for _ in range(n_layer):
            self.blocks.append(torch.nn.ModuleDict(dict(
                ln1=torch.nn.LayerNorm(d), qkv=torch.nn.Linear(d, 3 * d),
                proj=torch.nn.Linear(d, d), ln2=torch.nn.LayerNorm(d),
                fc=torch.nn.Linear(d, 4 * d), out=torch.nn.Linear(4 * d, d))))
        self.ln_f = torch.nn.LayerNorm(d)
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)

    def new_cache(self, batch, capacity):
        """Per block K and V, [batch, heads, capacity, head_dim]."""
        p = self.wte.weight
        shape = (batch, self.n_head, capacity, self.d // self.n_head)
        return [(torch.empty(shape, device=p.device, dtype=p.dtype),
                 torch.empty(shape, device=p.device, dtype=p.dtype)) for _ in self.blocks]

    def _attend(self, q, k, v, causal):
        sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
        if sdpa is not None:
            return sdpa(q, k, v, is_causal=causal)
        scores = (q @ k.transpose(-1, -2)).float() / math.sqrt(q.shape[-1])
        if causal:
            L = q.shape[-2]
            mask = torch.ones(L, L, dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        return scores.softmax(-1).to(v.dtype) @ v

    def forward(self, tokens, cache, pos):
        """tokens [B, L] at positions pos..pos+L-1 (L > 1 only from pos 0)
        -> logits [B, vocab] of the last position; fills the cache."""
        B, L = tokens.shape
        nh, hd = self.n_head, self.d // self.n_head
        x = self.wte(tokens) + self.wpe(torch.arange(pos, pos + L, device=tokens.device))
        for block, (kc, vc) in zip(self.blocks, cache):
            qkv = block["qkv"](block["ln1"](x)).view(B, L, 3, nh, hd).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)  # [B, nh, L, hd]
            kc[:, :, pos:pos + L], vc[:, :, pos:pos + L] = k, v
            a = self._attend(q, kc[:, :, :pos + L], vc[:, :, :pos + L], causal=L > 1)
            x = x + block["proj"](a.transpose(1, 2).reshape(B, L, self.d))
            h = torch.nn.functional.gelu(block["fc"](block["ln2"](x)), approximate="tanh")
            x = x + block["out"](h)
        return self.ln_f(x[:, -1]) @ self.wte.weight.T

    @torch.inference_mode()
    def generate_greedy(self, prompts, new_tokens):
        """prompts [B, L] -> [B, new_tokens] greedy tokens: the first from
        the prompt's last logits, then new_tokens - 1 steps (as generate)."""
        B, L = prompts.shape
        cache = self.new_cache(B, L + new_tokens)
        out = [self(prompts, cache, 0).argmax(-1)]
        for i in range(new_tokens - 1):
            out.append(self(out[-1][:, None], cache, L + i).argmax(-1))
        return torch.stack(out, 1)
