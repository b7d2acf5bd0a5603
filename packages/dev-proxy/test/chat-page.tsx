// A chat page as an app would write it with the AI SDK: `useChat` against the dev server's
// `/api/chat`, the questions of the run answered through the page's own forms (tool outputs).
import { useChat } from '@ai-sdk/react';
import type { AgentUIMessage } from '@org/core/ai-sdk';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls } from 'ai';
import { useState, type FormEvent } from 'react';
import { createRoot } from 'react-dom/client';

declare global {
  interface Window {
    CHAT_SERVER: string;
  }
}

type Part = AgentUIMessage['parts'][number];
type ToolPart = Extract<Part, { toolCallId: string }>;

function chatIdFromUrl(): string {
  const url = new URL(location.href);
  let id = url.searchParams.get('chat');
  if (!id) {
    id = `chat-${crypto.randomUUID()}`;
    url.searchParams.set('chat', id);
    history.replaceState(null, '', url);
  }
  return id;
}

function Chat({ id, initial }: { id: string; initial: AgentUIMessage[] }) {
  const { messages, sendMessage, addToolOutput, status, error } = useChat<AgentUIMessage>({
    id,
    messages: initial,
    transport: new DefaultChatTransport({ api: `${window.CHAT_SERVER}/api/chat` }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
  });
  const [draft, setDraft] = useState('');

  const send = (event: FormEvent) => {
    event.preventDefault();
    void sendMessage({ text: draft });
    setDraft('');
  };

  const renderTool = (part: ToolPart, key: string) => {
    const name = part.type === 'dynamic-tool' ? part.toolName : part.type.slice('tool-'.length);
    if (name === 'chat_request_user_input' && part.state === 'input-available') {
      const input = part.input as { user_message: string };
      return (
        <form
          key={key}
          data-testid="ask"
          onSubmit={(event) => {
            event.preventDefault();
            const text = (new FormData(event.currentTarget).get('answer') as string) ?? '';
            void addToolOutput({ tool: 'chat_request_user_input', toolCallId: part.toolCallId, output: { input: { role: 'user', parts: [{ text }] } } });
          }}
        >
          <label>
            {input.user_message} <input name="answer" id="answer" />
          </label>
          <button type="submit">Answer</button>
        </form>
      );
    }
    if (name === 'chat_present_choices' && part.state === 'input-available') {
      const input = part.input as { user_message: string; choices: Array<{ id: string; label: string }> };
      return (
        <form
          key={key}
          data-testid="choices"
          onSubmit={(event) => {
            event.preventDefault();
            const picked = new FormData(event.currentTarget).get('choice') as string;
            void addToolOutput({ tool: 'chat_present_choices', toolCallId: part.toolCallId, output: { selected: { ids: [picked] } } });
          }}
        >
          <p>{input.user_message}</p>
          {input.choices.map((choice) => (
            <label key={choice.id}>
              <input type="radio" name="choice" value={choice.id} /> {choice.label}
            </label>
          ))}
          <button type="submit">Choose</button>
        </form>
      );
    }
    return (
      <li key={key} data-part="tool" data-name={name} data-state={part.state}>
        {name}: {part.state}
      </li>
    );
  };

  const renderPart = (part: Part, key: string) => {
    if (part.type === 'text') return <p key={key} data-part="text">{part.text}</p>;
    if (part.type === 'reasoning') return <p key={key} data-part="reasoning">{part.text}</p>;
    if (part.type === 'data-file') return <p key={key} data-part="file-name">{part.data.path}</p>;
    if (part.type === 'file') {
      const [, data = ''] = part.url.split(',');
      const text = part.mediaType.startsWith('text/') ? new TextDecoder().decode(Uint8Array.from(atob(data), (c) => c.charCodeAt(0))) : '';
      return <pre key={key} data-part="file" data-media-type={part.mediaType}>{text}</pre>;
    }
    if ('toolCallId' in part) return renderTool(part as ToolPart, key);
    return null;
  };

  return (
    <main>
      <ol id="messages">
        {messages.map((message) => (
          <li key={message.id} data-role={message.role}>
            {message.parts.map((part, index) => renderPart(part, `${message.id}-${index}`))}
          </li>
        ))}
      </ol>
      <p id="status" data-status={status}>
        {status}
      </p>
      {error ? <p id="error">{error.message}</p> : null}
      <form onSubmit={send}>
        <input id="message" value={draft} onChange={(event) => setDraft(event.currentTarget.value)} />
        <button id="send" type="submit">
          Send
        </button>
      </form>
    </main>
  );
}

async function main(): Promise<void> {
  const id = chatIdFromUrl();
  // A reload picks the conversation up from the server: the run's store and session log hold it.
  const response = await fetch(`${window.CHAT_SERVER}/api/chat/${id}`);
  const initial = response.ok ? ((await response.json()) as { messages: AgentUIMessage[] }).messages : [];
  createRoot(document.getElementById('root') as HTMLElement).render(<Chat id={id} initial={initial} />);
  document.body.dataset.ready = 'true';
}

void main();
