"""PyTorch's flash SDPA kernel on the shapes of tcinfer_bench_attention (bench_attention.c), for
issue 15's target: tcinfer's fused attention within 1.5x of PyTorch's flash SDPA kernel time.

Per shape: F.scaled_dot_product_attention on fp16 (b, h, s, d) tensors (ViT's from a packed
(b, s, 3, h, d) projection, as tcinfer reads it), the flash backend forced
(torch.nn.attention.sdpa_kernel), timed like the C benchmark: a CUDA graph of back-to-back calls,
median of 9 replays. The keep-mask shape runs with a bool mask, which flash does not take: it is
timed on the backend PyTorch picks (marked). With --tcinfer-ms, a JSON object {shape name: FA2
ms} (from tcinfer_bench_attention's table), it prints the ratio tcinfer / PyTorch too.

    python3 bench/attention_torch.py
    python3 bench/attention_torch.py --tcinfer-ms fa2.json
"""

import argparse
import json
import statistics

# name, b, h, s, d, causal, packed, keep: bench_attention.c's k_shapes
SHAPES = [
    ("ViT-B/16 b64 (packed QKV)", 64, 12, 197, 64, False, True, False),
    ("BERT-base b32 s128", 32, 12, 128, 64, False, False, False),
    ("BERT-base b32 s384", 32, 12, 384, 64, False, False, False),
    ("BERT-base b32 s384 keep mask", 32, 12, 384, 64, False, False, True),
    ("GPT-2 b1 s512 causal", 1, 12, 512, 64, True, False, False),
    ("GPT-2 b64 s512 causal", 64, 12, 512, 64, True, False, False),
    ("d128 b16 h16 s1024", 16, 16, 1024, 128, False, False, False),
    ("d128 b16 h16 s1024 causal", 16, 16, 1024, 128, True, False, False),
    ("d128 b64 h12 s197 (packed QKV)", 64, 12, 197, 128, False, True, False),
]


def pairs(s, causal):
    return s * (s + 1) / 2 if causal else s * s


def time_graph(torch, fn, inner):
    """Median ms of one call: `inner` calls captured in a CUDA graph, 9 timed replays."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()  # warm-up outside the capture (kernel selection, workspace)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(inner):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(9):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / inner)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tcinfer-ms", help="JSON {shape name: tcinfer FA2 ms} for the ratio column")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    ours = json.load(open(args.tcinfer_ms)) if args.tcinfer_ms else {}
    gen = torch.Generator(device="cuda").manual_seed(0)
    print(f"PyTorch {torch.__version__} SDPA on {torch.cuda.get_device_name()}: fp16, "
          "ms = median of 9 CUDA-graph replays\n")
    print("| shape | backend | ms | TFLOP/s | tcinfer FA2 ms | tcinfer / PyTorch |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name, b, h, s, d, causal, packed, keep in SHAPES:
        def rand(*shape):
            return (torch.rand(*shape, generator=gen, device="cuda") * 2 - 1).half()
        if packed:
            qkv = rand(b, s, 3, h, d)
            q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        else:
            q, k, v = rand(b, h, s, d), rand(b, h, s, d), rand(b, h, s, d)
        mask = None
        if keep:
            idx = torch.arange(s, device="cuda")
            lens = torch.tensor([s - 16 * (i % 8) for i in range(b)], device="cuda")
            mask = ((idx[None, :] < lens[:, None]) | (idx[None, :] == 0))[:, None, None, :]
        backend = "default" if keep else "flash"

        def call():
            if keep:
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        flops = 4.0 * b * h * d * pairs(s, causal)
        inner = 5 if flops > 5e11 else 20 if flops > 5e10 else 50
        ms = time_graph(torch, call, inner)
        mine = ours.get(name)
        ratio = f"{mine / ms:.2f}x" if mine else ""
        print(f"| {name} | {backend} | {ms:.4f} | {flops / (ms * 1e-3) / 1e12:.1f} | "
              f"{mine if mine else ''} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
