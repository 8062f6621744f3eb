// The official `openai` JavaScript client (from the npm registry) against a
// running h3serve: `node openai_client_test.mjs BASE_URL`, BASE_URL like
// http://127.0.0.1:8080/v1. Run by openai_test.cc, which installs the
// package next to a copy of this file. Exits 0 and prints "all checks
// passed" when every check holds; a failed check throws (exit 1).
import assert from 'node:assert/strict';

import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: process.argv[2],
  apiKey: 'unused',  // h3serve has no API keys yet; the client needs one
  maxRetries: 0,
  timeout: 30_000,
});

const models = await client.models.list();
assert.equal(models.data.length, 1);
const model = models.data[0].id;
assert.equal(model, 'h3-kjv');

const request = {model, prompt: 'And God said', max_tokens: 16, temperature: 0};
const whole = await client.completions.create(request);
assert.equal(whole.object, 'text_completion');
assert.equal(whole.choices.length, 1);
assert.equal(whole.choices[0].finish_reason, 'length');
assert.ok(whole.choices[0].text.length > 0);
assert.equal(whole.usage.completion_tokens, 16);
assert.equal(whole.usage.total_tokens,
             whole.usage.prompt_tokens + whole.usage.completion_tokens);

// Streamed, the same greedy text, then the usage chunk.
const stream = await client.completions.create(
    {...request, stream: true, stream_options: {include_usage: true}});
let text = '';
let finish = null;
let usage = null;
for await (const chunk of stream) {
  if (chunk.choices.length > 0) {
    text += chunk.choices[0].text;
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  if (chunk.usage) usage = chunk.usage;
}
assert.equal(text, whole.choices[0].text);
assert.equal(finish, 'length');
assert.deepEqual(usage, whole.usage);

// Legacy logprobs, a stop string and vLLM's extensions pass through.
const withLogprobs = await client.completions.create(
    {...request, max_tokens: 4, logprobs: 2, top_k: 5, min_p: 0.01});
const logprobs = withLogprobs.choices[0].logprobs;
assert.equal(logprobs.tokens.length, 4);
assert.equal(logprobs.token_logprobs.length, 4);
assert.equal(logprobs.text_offset.length, 4);
assert.equal(logprobs.tokens.join(''), withLogprobs.choices[0].text);
const words = whole.choices[0].text.split(' ');
const stopped = await client.completions.create({...request, stop: [' ' + words[2]]});
assert.equal(stopped.choices[0].finish_reason, 'stop');
assert.equal(stopped.choices[0].text, words.slice(0, 2).join(' '));

// Errors arrive as the client's APIError with OpenAI's fields.
await assert.rejects(
    client.completions.create({...request, max_tokens: 100_000}),
    (e) => e instanceof OpenAI.APIError && e.status === 400 &&
        e.param === 'max_tokens' && e.type === 'invalid_request_error');
await assert.rejects(
    client.completions.create({...request, n: 2}),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'n');
await assert.rejects(
    client.completions.create({...request, model: 'gpt-4'}),
    (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
await assert.rejects(
    client.chat.completions.create(
        {model, messages: [{role: 'user', content: 'Hi'}]}),
    (e) => e instanceof OpenAI.NotFoundError && /base model/.test(e.message));

// Leaving a stream early closes its connection.
const long = await client.completions.create(
    {...request, max_tokens: 400, stream: true});
for await (const chunk of long) {
  assert.equal(chunk.object, 'text_completion');
  break;
}

console.log('openai client: all checks passed');
