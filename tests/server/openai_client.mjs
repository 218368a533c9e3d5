// openai_client.mjs PORT KEY -- the official `openai` npm package against
// snapbank serve, unchanged: models, chat completions plain and streamed
// (with include_usage), text completions, a session continued through a
// body field and a header, and the library's own error classes for 404,
// 401 and 400. Prints "ok" and exits 0, or throws.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const [port, key, engine = 'builtin'] = process.argv.slice(2);
const baseURL = `http://127.0.0.1:${port}/v1`;
const client = new OpenAI({ baseURL, apiKey: key, maxRetries: 0 });

const models = await client.models.list();
assert.deepEqual(models.data.map((m) => m.id), ['tiny']);
assert.equal((await client.models.retrieve('tiny')).id, 'tiny');

const msgs = [
  { role: 'system', content: 'You keep the pages of the bank.' },
  { role: 'user', content: 'What do you keep?' },
];
const r = await client.chat.completions.create({
  model: 'tiny', messages: msgs, max_tokens: 8, temperature: 0,
});
assert.equal(r.object, 'chat.completion');
assert.equal(r.choices[0].message.role, 'assistant');
assert.equal(r.choices[0].finish_reason, 'length');
assert.equal(r.usage.completion_tokens, 8);
assert.equal(r.usage.cache_mode, 'cold');
assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');

const stream = await client.chat.completions.create({
  model: 'tiny', messages: msgs, max_tokens: 8, temperature: 0, stream: true,
  stream_options: { include_usage: true },
});
let text = '';
let usage = null;
let finish = null;
for await (const chunk of stream) {
  if (chunk.choices.length) {
    text += chunk.choices[0].delta.content ?? '';
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  if (chunk.usage) usage = chunk.usage;
}
assert.equal(text, r.choices[0].message.content);
assert.equal(finish, 'length');
assert.equal(usage.cache_mode, 'warm_prefix');
// llama.cpp's engine keeps no logits in the bank: its last token is computed again
assert.equal(usage.prompt_tokens_details.cached_tokens,
             usage.prompt_tokens - (engine === 'builtin' ? 0 : 1));

const c = await client.completions.create({
  model: 'tiny', prompt: 'The bank keeps', max_tokens: 5, temperature: 0,
});
assert.equal(c.object, 'text_completion');
assert.equal(c.usage.completion_tokens, 5);

// a session: snapbank's body field passes through the client as it is
const s1 = await client.chat.completions.create({
  model: 'tiny', messages: [{ role: 'user', content: 'Remember me.' }],
  max_tokens: 6, temperature: 0, session_id: 'npm-1',
});
const s2 = await client.chat.completions.create({
  model: 'tiny',
  messages: [{ role: 'user', content: 'Remember me.' }, s1.choices[0].message,
    { role: 'user', content: 'Do you?' }],
  max_tokens: 6, temperature: 0, session_id: 'npm-1',
});
assert.equal(s2.usage.cache_mode, 'warm_prefix');
assert.ok(s2.usage.prompt_tokens_details.cached_tokens > s1.usage.prompt_tokens);
const withHeader = new OpenAI({
  baseURL, apiKey: key, maxRetries: 0, defaultHeaders: { 'X-Session-Id': 'npm-2' },
});
await withHeader.chat.completions.create({
  model: 'tiny', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2,
});

// errors arrive as the library's classes, with the server's fields
await assert.rejects(
  client.chat.completions.create({ model: 'gpt-4', messages: msgs }),
  (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === 'model_not_found',
);
const stranger = new OpenAI({ baseURL, apiKey: 'key-nobody-0000', maxRetries: 0 });
await assert.rejects(
  stranger.chat.completions.create({ model: 'tiny', messages: msgs }),
  (e) => e instanceof OpenAI.AuthenticationError && e.status === 401,
);
await assert.rejects(
  client.chat.completions.create({ model: 'tiny', messages: msgs, n: 2 }),
  (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'n',
);
await assert.rejects(
  client.chat.completions.create({ model: 'tiny', messages: [] }),
  (e) => e instanceof OpenAI.BadRequestError && e.code === 'empty_array',
);
console.log('ok');
