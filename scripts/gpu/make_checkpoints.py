# Random-weight checkpoints of real model shapes, written by transformers' save_pretrained with its
# defaults (dtype bf16, its own shard size and index), with the shop tokenizer (vocabulary 4,096), so
# the kit's episode-level runs (t2s benchmark, t2s train grpo) can load models of the sizes researchers
# bring on a GPU host that has no model hub. Shapes match lib/model/shapes.ts.
#   python3 make_checkpoints.py OUT_DIR TOKENIZER_DIR [shape ...]
# Prints one JSON line per checkpoint: its files and sizes and how long writing took.
import json, os, shutil, sys, time
import torch
from transformers import AutoConfig, AutoModelForCausalLM

SHAPES = {
    "qwen2.5-0.5b": ("qwen2", dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True)),
    "qwen2.5-1.5b": ("qwen2", dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2, tie_word_embeddings=True)),
    "qwen2.5-3b": ("qwen2", dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16, num_key_value_heads=2, tie_word_embeddings=True)),
    "qwen2.5-7b": ("qwen2", dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4, tie_word_embeddings=False)),
    "llama3.2-1b": ("llama", dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, head_dim=64, tie_word_embeddings=True)),
    "llama3.2-3b": ("llama", dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=28, num_attention_heads=24, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True)),
    "qwen3-4b": ("qwen3", dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True)),
}
ROPE = {
    "qwen2": {"rope_type": "default", "rope_theta": 1000000.0},
    "qwen3": {"rope_type": "default", "rope_theta": 1000000.0},
    "llama": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
}

def config_for(kind, kw):
    common = dict(vocab_size=4096, max_position_embeddings=4096, rms_norm_eps=1e-6 if kind != "llama" else 1e-5,
                  eos_token_id=2, pad_token_id=0, bos_token_id=None, **kw)
    try:
        return AutoConfig.for_model(kind, rope_parameters=ROPE[kind], **common)
    except TypeError:
        rope = dict(ROPE[kind])
        theta = rope.pop("rope_theta")
        return AutoConfig.for_model(kind, rope_theta=theta, rope_scaling=None if rope["rope_type"] == "default" else rope, **common)

def main():
    out, tok = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or list(SHAPES)
    torch.manual_seed(0)
    for name in names:
        kind, kw = SHAPES[name]
        d = os.path.join(out, name)
        t0 = time.time()
        cfg = config_for(kind, kw)
        with torch.device("cuda"):
            try:
                model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
            except TypeError:
                model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
        model.save_pretrained(d)
        for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
            if os.path.exists(os.path.join(tok, f)):
                shutil.copy(os.path.join(tok, f), os.path.join(d, f))
        params = sum(p.numel() for p in model.parameters())
        del model
        torch.cuda.empty_cache()
        files = {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".safetensors")}
        print(json.dumps({"shape": name, "dir": d, "params": params, "files": files, "write_s": round(time.time() - t0, 1)}), flush=True)

main()
