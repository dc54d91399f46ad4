"""Models with random weights, their seeded inputs and their export to ONNX: the code that
bench_models.py (the transformer family) and zoo.py share.

torch is passed in (imported by the caller, lazily), so importing this module needs the
standard library only.
"""

import os
import warnings

OPSET = 17
SEQ = 128  # tokens of the text models unless a builder is given another length


def error_text(exc):
    first = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, first[0] if first else "")


def tuple_outputs(torch, model):
    """Wraps model so that forward returns a flat tuple of tensors (dicts, ModelOutputs and
    nested tuples flattened in order), the ONNX outputs in the same order."""

    def flat(x, out):
        if torch.is_tensor(x):
            out.append(x)
        elif isinstance(x, dict):
            for v in x.values():
                flat(v, out)
        elif isinstance(x, (list, tuple)):
            for v in x:
                flat(v, out)
        elif hasattr(x, "to_tuple"):
            flat(x.to_tuple(), out)
        return out

    class Flat(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *args):
            return tuple(flat(self.inner(*args), []))

    return Flat(model).eval()


def image_inputs(torch, shape):
    return {"input": ("float", tuple(shape), 0)}


def text_inputs(torch, vocab, seq=SEQ):
    return {"input_ids": ("ids", (seq,), vocab), "attention_mask": ("mask", (seq,), 0)}


def make_inputs(torch, desc, batch, seed, padded=True):
    """Seeded inputs of desc ({name: (kind, shape, vocab)}): normal floats, token ids, and an
    attention mask with a padded tail, as a batch of unequal prompts has (padded=False: all
    ones, a batch of full-length prompts)."""
    g = torch.Generator().manual_seed(seed)
    x = {}
    for name, (kind, shape, vocab) in desc.items():
        full = (batch,) + tuple(shape)
        if kind == "ids":
            x[name] = torch.randint(0, vocab, full, generator=g)
        elif kind == "mask":
            x[name] = torch.ones(full, dtype=torch.int64)
            if padded:
                x[name][:, shape[0] - shape[0] // 8:] = 0
        else:
            x[name] = torch.randn(full, generator=g)
    return x


def transformers_model(kind, seq=SEQ, attn_implementation=None, logits_to_keep=None):
    """A builder (torch -> (model, input desc, options)) of a transformers model with random
    weights. attn_implementation ("sdpa", "eager") is set on the config when given (else the
    library's default); logits_to_keep (GPT-2) keeps the logits of the last positions only, as
    generate's prefill asks."""
    def build(torch):
        import transformers as tf
        cfg = {"attn_implementation": attn_implementation} if attn_implementation else {}
        if kind == "bert":
            model, vocab = tf.BertModel(tf.BertConfig(**cfg)), 30522
        elif kind == "distilbert":
            model, vocab = tf.DistilBertModel(tf.DistilBertConfig(**cfg)), 30522
        elif kind == "roberta":
            model, vocab = tf.RobertaModel(tf.RobertaConfig(vocab_size=50265,
                                                            max_position_embeddings=514,
                                                            **cfg)), 50265
        elif kind == "gpt2":
            config = tf.GPT2Config(use_cache=False, **cfg)
            model = tf.GPT2LMHeadModel(config)
            vocab = config.vocab_size
        elif kind == "vit":
            model = tf.ViTForImageClassification(tf.ViTConfig(num_labels=1000, **cfg))
            return model, image_inputs(torch, (3, 224, 224)), {}
        elif kind == "wav2vec2":
            model = tf.Wav2Vec2Model(tf.Wav2Vec2Config(**cfg))

            return model, {"input": ("float", (16000,), 0)}, {}
        else:
            raise ValueError(kind)
        extra = {"logits_to_keep": logits_to_keep} if logits_to_keep else {}
        # outputs come back as a ModelOutput, flattened in order by tuple_outputs (GPT-2's
        # head reads its body's output by attribute, so return_dict=False breaks it in
        # transformers 5)

        class ByName(torch.nn.Module):
            """Passes the inputs by name (GPT-2's second positional input is the KV cache)."""

            def __init__(self):
                super().__init__()
                self.inner = model

            def forward(self, input_ids, attention_mask):
                return self.inner(input_ids=input_ids, attention_mask=attention_mask, **extra)

        return ByName(), text_inputs(torch, vocab, seq), {}
    return build


def export_onnx(torch, model, args, path, input_names, output_names, dynamic_axes):
    """Writes model (called on the tuple args) to path: the TorchScript exporter at OPSET, the
    dynamo exporter at opset 18 where that one fails, with a dynamic first dim of every input.
    Returns (how, note): the exporter and opset, and why the first one failed (or None)."""
    how, note = "TorchScript, opset %d" % OPSET, None
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, args, path, dynamo=False,
                              opset_version=OPSET, input_names=input_names,
                              output_names=output_names, dynamic_axes=dynamic_axes,
                              do_constant_folding=True)
    except Exception as e:
        note = "TorchScript exporter failed: " + error_text(e)
        how = "dynamo, opset 18"
        with torch.no_grad():
            prog = torch.onnx.export(
                model, args, path, dynamo=True, opset_version=18,
                input_names=input_names, output_names=output_names,
                dynamic_shapes=tuple({0: torch.export.Dim("batch", min=1, max=1024)}
                                     for _ in input_names))
        if prog is not None and not os.path.exists(path):
            prog.save(path)
    return how, note
