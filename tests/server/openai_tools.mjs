// openai_tools.mjs PORT -- the official `openai` npm package's tool calls
// against snapbank serve, unchanged: a model whose answer is a Hermes
// <tool_call> (make-model --answer) asked with tools, not streamed and
// streamed (the SDK's own stream helper assembles the call from the
// deltas), then the call and the tool's answer sent back. Prints "ok" and
// exits 0, or throws.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const [port] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'none',
                            maxRetries: 0 });
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather', description: 'The weather of a city.',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
const want = { city: 'Paris', days: 2 };

const r = await client.chat.completions.create({
  model: 'caller', messages, tools, tool_choice: 'auto', temperature: 0, max_tokens: 8,
});
const call = r.choices[0].message.tool_calls[0];
assert.equal(r.choices[0].finish_reason, 'tool_calls');
assert.equal(r.choices[0].message.content, null);
assert.equal(call.type, 'function');
assert.equal(call.function.name, 'get_weather');
assert.deepEqual(JSON.parse(call.function.arguments), want);

// streamed, through the SDK's helper that assembles the deltas
const stream = client.chat.completions.stream({
  model: 'caller', messages, tools, temperature: 0, max_tokens: 8,
});
const done = await stream.finalChatCompletion();
const sc = done.choices[0].message.tool_calls;
assert.equal(sc.length, 1);
assert.equal(sc[0].function.name, 'get_weather');
assert.deepEqual(JSON.parse(sc[0].function.arguments), want);
assert.equal(done.choices[0].finish_reason, 'tool_calls');

// the call and its result go back
const r2 = await client.chat.completions.create({
  model: 'caller', tools, temperature: 0, max_tokens: 8,
  messages: [...messages, r.choices[0].message,
             { role: 'tool', tool_call_id: call.id, content: '{"sky": "clear"}' }],
});
assert.equal(r2.choices[0].finish_reason, 'tool_calls');
assert.ok(r2.usage.prompt_tokens_details.cached_tokens > 0);

console.log('ok');
