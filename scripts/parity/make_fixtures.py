#!/usr/bin/env python3
"""Makes the model parity fixtures of t2s-lab (test/fixtures/model/).

Builds tiny random checkpoints of LlamaForCausalLM (F32, sharded), a Llama with llama3 rope scaling,
Qwen2ForCausalLM (q/k/v bias, tied embeddings, saved in BF16) and Qwen3ForCausalLM (q/k norms, explicit
head_dim, saved in F16), a tiny byte-level BPE tokenizer with a hermes-style chat template, and two PEFT
LoRA adapters whose B matrices are non-zero. Next to each it writes reference.json: fp32 logits of
transformers for fixed id sequences, greedy continuations, tokenizer ids of a few texts and rendered
chat templates. Everything lands in OUT/fixtures.tar.gz (one file, so it comes back in one piece).

Usage: python3 make_fixtures.py --out DIR [--tokenizer-only]
The tokenizer part needs only `tokenizers`, `transformers` and `jinja2`; the models need torch and peft.
"""
import argparse
import json
import os
import shutil
import sys
import tarfile
import traceback

CHAT_TEMPLATE = r"""{%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0]['role'] == 'system' %}
{{- messages[0]['content'] }}
{%- else %}
{{- 'You are a helpful assistant.' }}
{%- endif %}
{{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
{%- for tool in tools %}
{{- "\n" }}
{{- tool | tojson }}
{%- endfor %}
{{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
{%- if messages[0]['role'] == 'system' %}
{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
{%- else %}
{{- '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}
{%- endif %}
{%- endif %}
{%- for message in messages %}
{%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
{%- elif message.role == "assistant" %}
{{- '<|im_start|>' + message.role }}
{%- if message.content %}
{{- '\n' + message.content }}
{%- endif %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}
{%- set tool_call = tool_call.function %}
{%- endif %}
{{- '\n<tool_call>\n{"name": "' }}
{{- tool_call.name }}
{{- '", "arguments": ' }}
{%- if tool_call.arguments is string %}
{{- tool_call.arguments }}
{%- else %}
{{- tool_call.arguments | tojson }}
{%- endif %}
{{- '}\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif message.role == "tool" %}
{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
{{- '<|im_start|>user' }}
{%- endif %}
{{- '\n<tool_response>\n' }}
{{- message.content }}
{{- '\n</tool_response>' }}
{%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
{{- '<|im_end|>\n' }}
{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- endif %}
"""

QWEN_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

CORPUS = [
    "SELECT name, price FROM products WHERE price > 10 ORDER BY price DESC;",
    "SELECT COUNT(*) FROM orders JOIN customers ON orders.customer_id = customers.id;",
    "How many customers placed an order in 2024? Answer with one SQL query.",
    "The quick brown fox jumps over the lazy dog. Numbers: 12345 and 3.14.",
    "<tool_call>\n{\"name\": \"run_sql\", \"arguments\": {\"sql\": \"SELECT 1\"}}\n</tool_call>",
    "You are a helpful assistant that writes SQLite queries for the shop database.",
] * 20

TEXTS = [
    "SELECT name FROM products;",
    "Hello world!  How are   you?\n\nFine.",
    "héllo wörld — 世界 🙂",
    "<|im_start|>user\nHow many orders?<|im_end|>\n<|im_start|>assistant\n",
    "<tool_call>\n{\"name\": \"run_sql\", \"arguments\": {\"sql\": \"SELECT 1\"}}\n</tool_call>",
    "  leading spaces and trailing\t",
    "it's what we'll do, they've said; I'm sure.",
]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_sql",
            "description": "Run a read-only SQL query on the shop database and return the rows.",
            "parameters": {
                "type": "object",
                "properties": {"sql": {"type": "string", "description": "One SQLite query"}},
                "required": ["sql"],
            },
        },
    }
]

CHATS = [
    {"messages": [{"role": "user", "content": "How many orders are there?"}]},
    {
        "messages": [
            {"role": "system", "content": "You write SQLite."},
            {"role": "user", "content": "List products."},
            {"role": "assistant", "content": "SELECT * FROM products;"},
            {"role": "user", "content": "Only names, please — ünïcode ok?"},
        ]
    },
    {"messages": [{"role": "user", "content": "Count the customers."}], "tools": TOOLS},
    {
        "messages": [
            {"role": "system", "content": "Use the tool."},
            {"role": "user", "content": "Count the customers."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"type": "function", "function": {"name": "run_sql", "arguments": {"sql": "SELECT COUNT(*) FROM customers"}}}
                ],
            },
            {"role": "tool", "content": "[[42]]"},
        ],
        "tools": TOOLS,
    },
]

ID_SEQUENCES = [
    [5],
    [1, 77, 100, 12, 200, 3, 45, 2],
    [i * 37 % 300 for i in range(1, 41)],
]

GREEDY_PROMPT = [1, 120, 64, 33, 250, 9]
GREEDY_NEW = 12


def log(msg):
    print(msg, flush=True)


def build_tokenizer(folder, template_in_file=False):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer=trainer)
    tok.add_tokens([AddedToken("<tool_call>", special=False, normalized=False), AddedToken("</tool_call>", special=False, normalized=False)])
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "model_max_length": 4096,
        "clean_up_tokenization_spaces": False,
        "add_bos_token": False,
    }
    if template_in_file:
        with open(os.path.join(folder, "chat_template.jinja"), "w", encoding="utf-8") as f:
            f.write(CHAT_TEMPLATE)
    else:
        cfg["chat_template"] = CHAT_TEMPLATE
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
    return tok.get_vocab_size()


def tokenizer_reference(folder):
    """Ids of TEXTS, decodes, and rendered CHATS as transformers produces them."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    out = {"texts": [], "decode": [], "chats": [], "vocab_size": len(tok)}
    for t in TEXTS:
        out["texts"].append({"text": t, "ids": tok(t, add_special_tokens=True)["input_ids"]})
    for ids in [[258, 1, 99, 2], [200, 201, 202, 203, 204], [0, 65, 66, 2, 301, 300]]:
        ids = [i for i in ids if i < len(tok)]
        out["decode"].append(
            {"ids": ids, "text": tok.decode(ids), "skip_special": tok.decode(ids, skip_special_tokens=True)}
        )
    for chat in CHATS:
        text = tok.apply_chat_template(chat["messages"], tools=chat.get("tools"), tokenize=False, add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        out["chats"].append({"messages": chat["messages"], "tools": chat.get("tools"), "text": text, "ids": ids})
    return out


def randomize(model, scale=0.15):
    """Replaces the tiny default init with larger random weights so logits differ by more than the tolerance."""
    import torch

    g = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(scale * torch.randn(p.shape, generator=g))


def logits_reference(model):
    import torch

    out = {"sequences": []}
    model.eval()
    with torch.no_grad():
        for ids in ID_SEQUENCES:
            x = torch.tensor([ids], dtype=torch.long)
            logits = model(input_ids=x).logits[0].float()
            out["sequences"].append({"ids": ids, "logits": [[round(float(v), 7) for v in row] for row in logits.tolist()]})
        # greedy by full recomputation (no cache, no generation-config rules), so the kit's cached sampler
        # is compared with the plain definition
        seq = list(GREEDY_PROMPT)
        for _ in range(GREEDY_NEW):
            nxt = model(input_ids=torch.tensor([seq], dtype=torch.long)).logits[0, -1]
            seq.append(int(torch.argmax(nxt)))
        out["greedy"] = {"prompt": GREEDY_PROMPT, "new_ids": seq[len(GREEDY_PROMPT):]}
    return out


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False)


def make_model(kind, folder, vocab, tok_ref):
    import torch
    import transformers

    torch.manual_seed(0)
    common = dict(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        bos_token_id=None,
        eos_token_id=2,
        pad_token_id=0,
    )
    save_kwargs = {}
    dtype = torch.float32
    if kind == "llama":
        cfg = transformers.LlamaConfig(**common, rope_theta=10000.0, tie_word_embeddings=False)
        cls = transformers.LlamaForCausalLM
        save_kwargs["max_shard_size"] = "150KB"
    elif kind == "llama3rope":
        cfg = transformers.LlamaConfig(
            **common,
            rope_theta=500000.0,
            tie_word_embeddings=True,
            rope_scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            },
        )
        cls = transformers.LlamaForCausalLM
    elif kind == "qwen2":
        cfg = transformers.Qwen2Config(**common, rope_theta=1000000.0, tie_word_embeddings=True)
        cls = transformers.Qwen2ForCausalLM
        dtype = torch.bfloat16
    elif kind == "qwen3":
        cfg = transformers.Qwen3Config(**common, head_dim=32, rope_theta=1000000.0, tie_word_embeddings=False)
        cls = transformers.Qwen3ForCausalLM
        dtype = torch.float16
    else:
        raise ValueError(kind)
    model = cls(cfg).to(torch.float32)
    randomize(model)
    if dtype != torch.float32:
        model = model.to(dtype)
    model.save_pretrained(folder, safe_serialization=True, **save_kwargs)
    # the reference is the saved weights computed in fp32 (upcasting bf16/f16 is exact)
    ref_model = cls.from_pretrained(folder, dtype=torch.float32)
    ref = logits_reference(ref_model)
    ref["architecture"] = cls.__name__
    ref["dtype"] = str(dtype)
    ref["tokenizer"] = tok_ref
    write_json(os.path.join(folder, "reference.json"), ref)
    return ref_model


def make_adapter(base_model, folder, targets, r, alpha, rslora, seed):
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    cfg = LoraConfig(r=r, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM", use_rslora=rslora)
    peft_model = get_peft_model(base_model, cfg)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            # large enough to move the logits clearly, small enough that fp32 rounding stays far below 1e-4
            if "lora_B" in name or "lora_A" in name:
                p.copy_(0.06 * torch.randn(p.shape, generator=g))
    peft_model.save_pretrained(folder, safe_serialization=True)
    ref = {"unmerged": logits_reference(peft_model)}
    merged = peft_model.merge_and_unload()
    ref["merged"] = logits_reference(merged)
    ref["targets"] = targets
    write_json(os.path.join(folder, "reference.json"), ref)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer-only", action="store_true")
    args = ap.parse_args()
    root = os.path.join(args.out, "model")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    status = {}
    try:
        import transformers

        status["transformers"] = transformers.__version__
    except Exception as e:  # noqa: BLE001
        status["transformers"] = repr(e)

    tok_dir = os.path.join(root, "tokenizer")
    vocab = build_tokenizer(tok_dir)
    tok_ref = tokenizer_reference(tok_dir)
    write_json(os.path.join(tok_dir, "reference.json"), tok_ref)
    log(f"tokenizer: vocab {vocab}")
    model_vocab = 320
    if not args.tokenizer_only:
        import peft
        import torch

        status["torch"] = torch.__version__
        status["peft"] = peft.__version__
        torch.set_default_dtype(torch.float32)
        torch.backends.cuda.matmul.allow_tf32 = False
        for kind in ["llama", "llama3rope", "qwen2", "qwen3"]:
            folder = os.path.join(root, kind)
            try:
                build_tokenizer(folder, template_in_file=(kind == "qwen3"))
                base = make_model(kind, folder, model_vocab, tok_ref)
                log(f"{kind}: ok")
                if kind == "llama":
                    make_adapter(base, os.path.join(root, "llama-lora"), ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], 4, 8, False, 7)
                    log("llama-lora: ok")
                if kind == "qwen2":
                    make_adapter(base, os.path.join(root, "qwen2-lora"), ["q_proj", "v_proj"], 2, 4, True, 11)
                    log("qwen2-lora: ok")
                status[kind] = "ok"
            except Exception:  # noqa: BLE001
                status[kind] = traceback.format_exc()
                log(f"{kind}: FAILED\n{status[kind]}")
    write_json(os.path.join(root, "status.json"), status)
    for dirpath, _, files in os.walk(root):
        for f in sorted(files):
            p = os.path.join(dirpath, f)
            log(f"{os.path.relpath(p, root)} {os.path.getsize(p)}")
    with tarfile.open(os.path.join(args.out, "fixtures.tar.gz"), "w:gz") as tar:
        tar.add(root, arcname="model")
    shutil.rmtree(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
