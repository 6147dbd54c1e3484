// AG-UI's own client (npm package @ag-ui/client: HttpAgent, the agent CopilotKit and others build on)
// against a live `helix-dbos serve` with the scripted agents of tests/service/agents.py. Run by
// tests/service/test_agui_client.py:
//
//     node agui_client.mjs <base url> <bearer token>
//
// Every scenario asserts on what the client library made of the stream (its messages and state);
// the library checks the order of every event (verifyEvents) and parses each against the protocol's
// schema, so a drift of the protocol fails here. Exit code 0 and a JSON summary on stdout when every
// scenario passed.
import assert from 'node:assert/strict';
import { HttpAgent, runHttpRequest, transformHttpEventStream } from '@ag-ui/client';

const [baseUrl, token] = process.argv.slice(2);
assert.ok(baseUrl && token, 'usage: node agui_client.mjs <base url> <token>');
const url = `${baseUrl}/v1/agui`;
const headers = { Authorization: `Bearer ${token}` };
const runTag = `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;

// A fetch that notes each SSE event's `id:` in the order the client parses the events, so the agent
// knows the Last-Event-ID of the last event it applied (HttpAgent's own parser reads only `data:`).
// `control.dropAfter(event)` simulates a lost connection: once the agent has applied the first
// event it matches, the response ends in an error (and the request to the server is cancelled).
function idRecordingFetch(ids, control) {
  return async (input, init) => {
    const response = await fetch(input, init);
    if (!response.ok || !response.body) return response;
    const decoder = new TextDecoder();
    const encoder = new TextEncoder();
    let buffer = '';
    const body = response.body.pipeThrough(
      new TransformStream({
        async transform(chunk, controller) {
          buffer += decoder.decode(chunk, { stream: true });
          const blocks = buffer.split('\n\n');
          buffer = blocks.pop();
          for (const block of blocks) {
            const lines = block.split('\n');
            const data = lines.find(line => line.startsWith('data:'));
            const id = lines.find(line => line.startsWith('id:'));
            if (data) ids.push(id ? id.slice(3).trim() : null); // else a ping
            const event = data ? JSON.parse(data.slice(5)) : undefined;
            if (event && control.dropAfter?.(event)) {
              control.dropAfter = undefined;
              const applied = new Promise(resolve => {
                control.applied = seen => seen.type === event.type && resolve();
              });
              controller.enqueue(encoder.encode(`${block}\n\n`));
              await applied;
              // Named like the error of an aborted fetch, which HttpAgent turns into RUN_ERROR `abort`.
              const lost = new Error('connection lost');
              lost.name = 'AbortError';
              controller.error(lost);
              return;
            }
            controller.enqueue(encoder.encode(`${block}\n\n`));
          }
        },
        flush(controller) {
          if (buffer) controller.enqueue(encoder.encode(buffer));
        },
      }),
    );
    return new Response(body, { status: response.status, headers: response.headers });
  };
}

// HttpAgent, plus the re-attach helix serves: connect() (what connectAgent() runs) reads
// GET /v1/agui/threads/{threadId}/stream with the Last-Event-ID of the last event applied.
class HelixAgent extends HttpAgent {
  constructor({ agentName, ...config }) {
    const ids = [];
    const self = {};
    super({ url, headers, fetch: idRecordingFetch(ids, self), ...config });
    this.drop = self;
    this.agentName = agentName;
    this.sseIds = ids;
    this.lastEventId = undefined;
    this.events = [];
    this.subscribe({
      onEvent: ({ event }) => {
        if (event.type === 'RUN_ERROR' && event.code === 'abort') return; // the client's own, not sent
        this.events.push(event);
        const id = this.sseIds.shift();
        if (id) this.lastEventId = id;
        this.drop.applied?.(event);
      },
    });
  }

  run(input) {
    return super.run({ ...input, forwardedProps: { ...(input.forwardedProps ?? {}), agent: this.agentName } });
  }

  connect(input) {
    const reattach = { ...headers, Accept: 'text/event-stream' };
    if (this.lastEventId) reattach['Last-Event-ID'] = this.lastEventId;
    const where = `${url}/threads/${encodeURIComponent(input.threadId)}/stream?runId=${encodeURIComponent(input.runId)}`;
    return transformHttpEventStream(runHttpRequest(() => this.fetch(where, { headers: reattach })));
  }

  types() {
    return this.events.map(event => event.type);
  }
}

const assistantText = agent =>
  agent.messages
    .filter(m => m.role === 'assistant' && m.content)
    .map(m => m.content)
    .join('');
const toolCall = (agent, name) =>
  agent.messages.flatMap(m => m.toolCalls ?? []).find(call => call.function.name === name);
const say = (agent, content) => agent.addMessage({ id: `user-${agent.messages.length}-${runTag}`, role: 'user', content });

// 1. A text run, streamed end to end.
async function textRun() {
  const agent = new HelixAgent({ agentName: 'echo', threadId: `text-${runTag}` });
  say(agent, 'hello there');
  const { result } = await agent.runAgent();
  assert.equal(assistantText(agent), 'echo: hello there');
  assert.equal(result, 'echo: hello there');
  const types = agent.types();
  assert.equal(types[0], 'RUN_STARTED');
  assert.equal(types.at(-1), 'RUN_FINISHED');
  for (const type of ['STATE_SNAPSHOT', 'STEP_STARTED', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_END']) {
    assert.ok(types.includes(type), `${type} in ${types}`);
  }
  return { text: assistantText(agent), types };
}

// 2. A client-executed tool (HITL): the run finishes with the call pending, the client answers
// with a tool message in a new run, and the same helix run goes on.
async function clientTool() {
  const agent = new HelixAgent({ agentName: 'locator', threadId: `tool-${runTag}` });
  let pending;
  say(agent, 'Where am I?');
  const tools = [{ name: 'get_location', description: 'Where the user is', parameters: { type: 'object' } }];
  await agent.runAgent({ tools }, { onRunFinishedEvent: ({ pendingToolCallIds }) => void (pending = pendingToolCallIds) });
  const call = toolCall(agent, 'get_location');
  assert.ok(call, 'the client holds the get_location call');
  assert.deepEqual(pending, [call.id]);
  assert.deepEqual(JSON.parse(call.function.arguments), { city: '?' });
  // The server-run tool's result came as TOOL_CALL_RESULT.
  const note = toolCall(agent, 'note');
  const noteResult = agent.messages.find(m => m.role === 'tool' && m.toolCallId === note.id);
  assert.deepEqual(JSON.parse(noteResult.content), { saved: 'asked for location' });
  agent.addMessage({ id: `tool-${runTag}`, role: 'tool', toolCallId: call.id, content: JSON.stringify({ city: 'Lima' }) });
  await agent.runAgent({ tools });
  assert.equal(assistantText(agent), 'Let me take a note first.Now I ask your browser.You are in Lima.');
  assert.equal(agent.messages.filter(m => m.role === 'tool').length, 2, 'no duplicate tool messages');
  return { text: assistantText(agent) };
}

// 3. An approval: the run finishes with an interrupt; the next run resumes it.
async function approval() {
  const agent = new HelixAgent({ agentName: 'janitor', threadId: `approval-${runTag}` });
  say(agent, 'clean up');
  await agent.runAgent();
  assert.equal(agent.pendingInterrupts.length, 1);
  const [interrupt] = agent.pendingInterrupts;
  assert.equal(interrupt.reason, 'tool_approval');
  assert.equal(toolCall(agent, 'remove').id, interrupt.toolCallId);
  await agent.runAgent({ resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }] });
  assert.equal(agent.pendingInterrupts.length, 0);
  assert.equal(assistantText(agent), 'Done: {"removed":"/tmp/x"}');
  return { text: assistantText(agent) };
}

// 4. State: the client's state seeds the thread (STATE_SNAPSHOT), the run's changes arrive as
// STATE_DELTA, and a second turn starts from the session's state without applying a change twice.
async function state() {
  const agent = new HelixAgent({ agentName: 'counter', threadId: `state-${runTag}`, initialState: { count: 5, log: [] } });
  const turn = async (by, i) => {
    say(agent, `add ${by}`);
    await agent.runAgent();
    const call = agent.messages.flatMap(m => m.toolCalls ?? []).filter(c => c.function.name === 'pick_amount').at(-1);
    agent.addMessage({ id: `amount-${i}-${runTag}`, role: 'tool', toolCallId: call.id, content: JSON.stringify({ by }) });
    const before = agent.events.length;
    await agent.runAgent();
    return agent.events.slice(before);
  };
  const first = await turn(2, 1);
  const snapshot = first.find(e => e.type === 'STATE_SNAPSHOT');
  assert.deepEqual(snapshot.snapshot, { count: 5, log: [] }, 'the snapshot is the state before the change');
  const deltas = first.filter(e => e.type === 'STATE_DELTA');
  assert.ok(deltas.length >= 1, 'the change came as STATE_DELTA');
  assert.deepEqual(agent.state, { count: 7, log: ['+2'] });
  await turn(3, 2);
  assert.deepEqual(agent.state, { count: 10, log: ['+2', '+3'] });
  assert.equal(assistantText(agent).endsWith('Counter: {"count":10}'), true, assistantText(agent));
  return { state: agent.state, delta: deltas[0].delta };
}

// 5. Resume: the client drops the connection mid-run; a re-attach with Last-Event-ID goes on where
// it stopped (the open message continues, nothing is repeated), while the run never stopped.
async function resume() {
  const threadId = `resume-${runTag}`;
  const agent = new HelixAgent({ agentName: 'locator', threadId });
  say(agent, 'Where am I?');
  agent.drop.dropAfter = event => event.type === 'TEXT_MESSAGE_CONTENT';
  let dropped;
  await agent.runAgent({}, { onRunErrorEvent: ({ event }) => void (dropped = event) });
  assert.equal(dropped?.code, 'abort');
  const seen = agent.types();
  assert.equal(seen.at(-1), 'TEXT_MESSAGE_CONTENT', `dropped after the first text: ${seen}`);
  assert.ok(agent.lastEventId, 'an event id to resume after');
  const droppedAt = agent.lastEventId;
  let pending;
  await agent.connectAgent({}, { onRunFinishedEvent: ({ pendingToolCallIds }) => void (pending = pendingToolCallIds) });
  assert.equal(assistantText(agent), 'Let me take a note first.Now I ask your browser.');
  const call = toolCall(agent, 'get_location');
  assert.deepEqual(pending, [call.id]);
  agent.addMessage({ id: `tool-${runTag}-r`, role: 'tool', toolCallId: call.id, content: JSON.stringify({ city: 'Quito' }) });
  await agent.runAgent();
  assert.ok(assistantText(agent).endsWith('You are in Quito.'));
  // A client that holds nothing of the run re-attaches without Last-Event-ID: the run from its start.
  const fresh = new HelixAgent({ agentName: 'locator', threadId });
  await fresh.connectAgent();
  assert.equal(assistantText(fresh), 'Let me take a note first.Now I ask your browser.You are in Quito.');
  return { droppedAt, text: assistantText(agent), replayed: assistantText(fresh) };
}

// 6. A RunAgentInput the service cannot act on: a typed 422 when the schema refuses it, a
// RUN_ERROR with the code when the schema allows it (here: an assistant message last).
async function badInput() {
  const agent = new HelixAgent({ agentName: 'echo', threadId: `refused-${runTag}` });
  agent.addMessage({ id: `a-${runTag}`, role: 'assistant', content: 'I speak first' });
  let refused;
  await agent.runAgent({}, { onRunErrorEvent: ({ event }) => void (refused = event) });
  assert.equal(refused?.code, 'validation_error');
  const response = await fetch(url, {
    method: 'POST',
    headers: { ...headers, 'Content-Type': 'application/json' },
    body: JSON.stringify({ threadId: `bad-${runTag}`, runId: 'r1', messages: [] }),
  });
  assert.equal(response.status, 422);
  const body = await response.json();
  assert.equal(body.error.code, 'validation_error');
  return { status: response.status, code: body.error.code, inStream: refused.code };
}

const summary = {
  text: await textRun(),
  clientTool: await clientTool(),
  approval: await approval(),
  state: await state(),
  resume: await resume(),
  badInput: await badInput(),
};
console.log(JSON.stringify(summary));
