// The AI SDK's own chat client (npm package `ai`: AbstractChat, the engine of React's useChat, and
// DefaultChatTransport) against a live `helix-dbos serve` with the scripted agents of
// tests/service/agents.py. Run by tests/service/test_ai_sdk_client.py:
//
//     node ui_chat_client.mjs <base url> <bearer token>
//
// Every scenario asserts on what the client library made of the stream (UI messages and their
// parts); the library validates every part against its own schema, so a drift of the protocol
// fails here. Exit code 0 and a JSON summary on stdout when every scenario passed.
import assert from 'node:assert/strict';
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';

const [baseUrl, token] = process.argv.slice(2);
assert.ok(baseUrl && token, 'usage: node ui_chat_client.mjs <base url> <token>');
const api = `${baseUrl}/v1/chat/ui`;
const headers = { Authorization: `Bearer ${token}` };
const runTag = `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;

// A plain ChatState, what @ai-sdk/react's useChat keeps in React state.
class PlainState {
  constructor(messages = []) {
    this.messages = messages;
    this.status = 'ready';
    this.error = undefined;
  }
  pushMessage(message) {
    this.messages = this.messages.concat([message]);
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

class Chat extends AbstractChat {
  constructor({ messages, ...init }) {
    super({ ...init, state: new PlainState(messages) });
    this.errors = [];
  }
}

function newChat({ id, agent, fetch, ...init }) {
  const errors = [];
  const chat = new Chat({
    id,
    transport: new DefaultChatTransport({ api, headers, body: { agent }, fetch }),
    onError: error => errors.push(error),
    ...init,
  });
  chat.errors = errors;
  return chat;
}

async function until(chat, predicate, what, timeoutMs = 45_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (chat.errors.length > 0) {
      throw new Error(`${what}: the chat failed: ${chat.errors.map(e => e.stack ?? e).join('\n')}`);
    }
    if (predicate()) return;
    await new Promise(resolve => setTimeout(resolve, 25));
  }
  throw new Error(`${what}: timed out; status=${chat.status}; messages=${JSON.stringify(chat.messages, null, 1)}`);
}

// The README's useChat setup: post again once every client tool has its output or every approval
// its response.
const sendAutomaticallyWhen = ({ messages }) =>
  lastAssistantMessageIsCompleteWithToolCalls({ messages }) ||
  lastAssistantMessageIsCompleteWithApprovalResponses({ messages });

const assistant = chat => chat.messages.filter(m => m.role === 'assistant').at(-1);
const textOf = message => (message?.parts ?? []).filter(p => p.type === 'text').map(p => p.text).join('');
const toolPart = (message, name) => (message?.parts ?? []).find(p => p.type === `tool-${name}`);
const idle = chat => chat.status === 'ready' || chat.status === 'error';

// 1. A streamed text reply, read into UI messages; a repeated post finds the same run.
async function textReply() {
  const id = `text-${runTag}`;
  const chat = newChat({ id, agent: 'echo' });
  await chat.sendMessage({ text: 'hello there' });
  await until(chat, () => idle(chat) && textOf(assistant(chat)) === 'echo: hello there', 'text reply');
  const reply = assistant(chat);
  const text = reply.parts.find(p => p.type === 'text');
  assert.equal(text.state, 'done');
  assert.ok(reply.parts.some(p => p.type === 'step-start'), 'the reply has a step');
  assert.match(reply.metadata.sessionId, /^chat-[0-9a-f]{40}$/);
  assert.equal(reply.id, `msg-${reply.metadata.runId}`);

  // The same post again (a retry): the same run's reply, no second run.
  const again = await fetch(api, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ id, messages: chat.messages.slice(0, 1), trigger: 'submit-message', agent: 'echo' }),
  });
  assert.equal(again.status, 200);
  assert.equal(again.headers.get('x-vercel-ai-ui-message-stream'), 'v1');
  assert.match(again.headers.get('content-type'), /^text\/event-stream/);
  const raw = await again.text();
  const data = raw.split('\n').filter(l => l.startsWith('data: ')).map(l => l.slice(6));
  assert.equal(data.at(-1), '[DONE]');
  const parts = data.slice(0, -1).map(d => JSON.parse(d));
  assert.equal(parts[0].type, 'start');
  assert.equal(parts[0].messageMetadata.runId, reply.metadata.runId, 'a repeated post must not start a second run');
  assert.equal(parts.at(-1).type, 'finish');

  // Nothing in flight: the reconnect answers 204, and resumeStream() changes nothing.
  const reconnect = await fetch(`${api}/${id}/stream`, { headers });
  assert.equal(reconnect.status, 204);
  await chat.resumeStream();
  assert.equal(chat.messages.length, 2);
  return { runId: reply.metadata.runId, parts: reply.parts.map(p => p.type) };
}

// 2. A server tool, then a client-executed tool answered in the browser (onToolCall + addToolOutput,
//    sent automatically when the last message's tool calls are complete): the seeds' useResumeClientTools.
async function clientTool() {
  const calls = [];
  const chat = newChat({
    id: `client-${runTag}`,
    agent: 'locator',
    sendAutomaticallyWhen,
    onToolCall: ({ toolCall }) => {
      if (toolCall.toolName !== 'get_location') return; // the server runs its own tools
      calls.push(toolCall.toolCallId);
      chat.addToolOutput({ tool: 'get_location', toolCallId: toolCall.toolCallId, output: { city: 'Lima' } });
    },
  });
  await chat.sendMessage({ text: 'Where am I?' });
  await until(chat, () => idle(chat) && textOf(assistant(chat)).includes('You are in Lima.'), 'client tool');
  const reply = assistant(chat);
  assert.equal(chat.messages.length, 2, 'the answer continues the same assistant message');
  assert.deepEqual(toolPart(reply, 'note').output, { saved: 'asked for location' });
  assert.equal(toolPart(reply, 'note').state, 'output-available');
  const location = toolPart(reply, 'get_location');
  assert.equal(location.state, 'output-available');
  assert.deepEqual(location.output, { city: 'Lima' });
  assert.deepEqual(calls, [location.toolCallId], 'onToolCall ran once, for the client tool only');
  return { text: textOf(reply), parts: reply.parts.map(p => p.type) };
}

// 3. An approval-gated tool, approved and then denied in the browser (addToolApprovalResponse).
async function approval(approved) {
  const chat = newChat({
    id: `approval-${approved}-${runTag}`,
    agent: 'janitor',
    sendAutomaticallyWhen,
  });
  await chat.sendMessage({ text: 'Clean up /tmp/x' });
  await until(chat, () => idle(chat) && toolPart(assistant(chat), 'remove')?.state === 'approval-requested', 'approval request');
  const request = toolPart(assistant(chat), 'remove');
  assert.deepEqual(request.input, { path: '/tmp/x' });
  await chat.addToolApprovalResponse({ id: request.approval.id, approved, reason: approved ? undefined : 'not today' });
  await until(chat, () => idle(chat) && textOf(assistant(chat)).startsWith('Done:'), 'approved reply');
  const reply = assistant(chat);
  const part = toolPart(reply, 'remove');
  if (approved) {
    assert.equal(part.state, 'output-available');
    assert.deepEqual(part.output, { removed: '/tmp/x' });
  } else {
    assert.equal(part.state, 'output-denied');
  }
  return { text: textOf(reply), state: part.state };
}

// 4. The stream drops mid-reply (the connection is cut after three events); a new client (a page
//    reload) reconnects with resumeStream(), reads the whole reply replayed, answers the client tool.
async function resumeDropped() {
  const id = `resume-${runTag}`;
  let cut = false;
  const droppingFetch = async (url, init) => {
    const response = await fetch(url, init);
    if (cut || init?.method !== 'POST') return response;
    cut = true;
    const reader = response.body.getReader();
    let events = 0;
    const body = new ReadableStream({
      async pull(controller) {
        const { done, value } = await reader.read();
        const text = done ? '' : new TextDecoder().decode(value);
        events += (text.match(/\n\n/g) ?? []).length;
        if (done || events >= 3) {
          if (!done) controller.enqueue(value.slice(0, value.indexOf(10) + 1)); // part of an event, like a dropped connection
          controller.close();
          await reader.cancel();
          return;
        }
        controller.enqueue(value);
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
  const first = newChat({ id, agent: 'locator', fetch: droppingFetch });
  await first.sendMessage({ text: 'Where am I now?' }).catch(() => {});
  await until(first, () => idle(first), 'dropped stream');
  const seenBeforeDrop = first.messages.length;

  const calls = [];
  const reloaded = newChat({
    id,
    agent: 'locator',
    messages: first.messages.filter(m => m.role === 'user'),
    sendAutomaticallyWhen,
    onToolCall: ({ toolCall }) => {
      if (toolCall.toolName !== 'get_location') return;
      calls.push(toolCall.toolCallId);
      reloaded.addToolOutput({ tool: 'get_location', toolCallId: toolCall.toolCallId, output: { city: 'Quito' } });
    },
  });
  await reloaded.resumeStream();
  await until(reloaded, () => idle(reloaded) && textOf(assistant(reloaded)).includes('You are in Quito.'), 'resumed reply');
  const reply = assistant(reloaded);
  assert.equal(reloaded.messages.length, 2);
  assert.equal(toolPart(reply, 'note').state, 'output-available', 'the replay carries what the dropped stream lost');
  assert.ok(textOf(reply).startsWith('Let me take a note first.'), textOf(reply));
  assert.equal(calls.length, 1);
  return { seenBeforeDrop, text: textOf(reply) };
}

const summary = {};
summary.text = await textReply();
summary.clientTool = await clientTool();
summary.approved = await approval(true);
summary.denied = await approval(false);
summary.resume = await resumeDropped();
console.log(JSON.stringify(summary));
