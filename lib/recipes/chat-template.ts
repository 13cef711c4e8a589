/**
 * The chat template of the kit's own models: ChatML (`<|im_start|>role\n...<|im_end|>\n`) with tools
 * described in the system turn and calls written as hermes-style `<tool_call>` JSON blocks, tool results
 * returned in a user turn inside `<tool_response>` — the layout Qwen2-family instruct models use, so
 * every path of the kit (native tools, hermes text protocol) renders the same way for this model.
 */

const TOOLS_PREAMBLE =
  "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n" +
  "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>";
const TOOLS_POSTAMBLE =
  "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within " +
  '<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call>';

/** Returns the jinja source of the ChatML-with-tools template. */
export function chatMlTemplate(): string {
  return [
    "{%- set has_system = messages|length > 0 and messages[0].role == 'system' %}",
    "{%- if tools or has_system %}",
    "{{- '<|im_start|>system\\n' }}",
    "{%- if has_system %}{{- messages[0].content }}{%- endif %}",
    "{%- if tools %}",
    `{{- "${TOOLS_PREAMBLE}" }}`,
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}",
    `{{- "${TOOLS_POSTAMBLE}" }}`,
    "{%- endif %}",
    "{{- '<|im_end|>\\n' }}",
    "{%- endif %}",
    "{%- for message in messages %}",
    "{%- if message.role == 'system' and loop.first %}",
    "{%- elif message.role == 'user' or message.role == 'system' or (message.role == 'assistant' and not message.tool_calls) %}",
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}",
    "{%- elif message.role == 'assistant' %}",
    "{{- '<|im_start|>assistant' }}",
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}",
    "{%- for tool_call in message.tool_calls %}",
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}",
    "{{- '\\n<tool_call>\\n{\"name\": \"' + tool_call.name + '\", \"arguments\": ' }}",
    "{%- if tool_call.arguments is string %}{{- tool_call.arguments }}{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}",
    "{{- '}\\n</tool_call>' }}",
    "{%- endfor %}",
    "{{- '<|im_end|>\\n' }}",
    "{%- elif message.role == 'tool' %}",
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}",
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}",
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}",
    "{%- endif %}",
    "{%- endfor %}",
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
  ].join("\n");
}

/** Returns tokenizer_config.json for a ChatML model (eos <|im_end|>, pad <|endoftext|>, no bos). */
export function tokenizerConfig(maxLength: number): Record<string, unknown> {
  return {
    tokenizer_class: "PreTrainedTokenizerFast",
    bos_token: null,
    eos_token: "<|im_end|>",
    pad_token: "<|endoftext|>",
    unk_token: null,
    model_max_length: maxLength,
    clean_up_tokenization_spaces: false,
    add_bos_token: false,
    chat_template: chatMlTemplate(),
  };
}

/** The special tokens of the template, in id order, and the added (non-special) tool-call tags. */
export const CHAT_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
export const CHAT_ADDED_TOKENS = ["<tool_call>", "</tool_call>"];
