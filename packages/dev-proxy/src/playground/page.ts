/** The playground's HTML shell; the app itself is `/playground/app.js`. */
export const PLAYGROUND_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Agent playground</title>
<link rel="icon" href="data:,">
<style>
  :root { font-family: system-ui, sans-serif; color: #1d1d1f; background: #f6f7f9; }
  body { margin: 0; }
  header { padding: 16px 24px; background: #fff; border-bottom: 1px solid #e2e4e8; }
  header h1 { margin: 0; font-size: 18px; }
  header p { margin: 4px 0 0; color: #5f6368; font-size: 13px; }
  main { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 16px; padding: 16px 24px; }
  section + section { margin-top: 16px; }
  section { background: #fff; border: 1px solid #e2e4e8; border-radius: 8px; padding: 12px 16px; }
  textarea { width: 100%; box-sizing: border-box; font: inherit; padding: 8px; border: 1px solid #c9ccd1; border-radius: 6px; }
  button { font: inherit; padding: 6px 14px; margin: 8px 8px 0 0; border-radius: 6px; border: 1px solid #1a73e8; background: #1a73e8; color: #fff; cursor: pointer; }
  button.secondary, button#stop { background: #fff; color: #1a73e8; }
  button:disabled { opacity: .45; cursor: default; }
  #timeline { list-style: none; margin: 0; padding: 0; max-height: 70vh; overflow: auto; }
  .entry { border-left: 3px solid #c9ccd1; padding: 6px 10px; margin: 6px 0; font-size: 14px; }
  .entry .title { font-weight: 600; font-size: 12px; text-transform: uppercase; letter-spacing: .03em; color: #5f6368; }
  .entry.thought { border-color: #a142f4; font-style: italic; }
  .entry.call { border-color: #1a73e8; }
  .entry.suspend { border-color: #f9ab00; }
  .entry.error { border-color: #d93025; color: #d93025; }
  .entry.complete { border-color: #188038; }
  .entry.usage, .entry.request, .entry.finish { font-size: 12px; color: #5f6368; }
  .status { color: #5f6368; font-size: 12px; }
  .update { color: #7a3fb0; background: #f7f2fc; padding: 4px 6px; border-radius: 4px; margin: 4px 0; }
  .sources a { margin-right: 8px; font-size: 12px; }
  code, pre { font-family: ui-monospace, monospace; font-size: 12px; white-space: pre-wrap; word-break: break-word; }
  .run-in { display: block; margin-top: 8px; font-size: 13px; color: #5f6368; }
  select { font: inherit; margin-left: 6px; }
  .choice { display: flex; gap: 8px; align-items: center; margin: 6px 0; }
  .content .text { white-space: pre-wrap; }
  .markdown > :first-child { margin-top: 0; } .markdown > :last-child { margin-bottom: 0; }
  .markdown h1 { font-size: 1.3em; } .markdown h2 { font-size: 1.15em; } .markdown h3 { font-size: 1em; }
  .markdown pre { background: #f1f3f4; padding: 6px 8px; border-radius: 4px; }
  .unsafe-link { text-decoration: underline dotted; color: #5f6368; }
  img { max-width: 100%; border-radius: 6px; }
  #result[data-status=success] h2 { color: #188038; }
  #result[data-status=error] h2, .error { color: #d93025; }
  figure.file { margin: 8px 0; } figcaption { font-family: ui-monospace, monospace; font-size: 12px; color: #5f6368; }
  @media (max-width: 800px) { main { grid-template-columns: 1fr; } }
</style>
</head>
<body>
<header>
  <h1>Agent playground</h1>
  <p>Runs go to this dev server's <code>POST /v1beta1/streamRunAgent</code> through the client SDK, or run inside this page.</p>
</header>
<main>
  <div>
    <section>
      <form id="objective-form">
        <label for="objective"><strong>Objective</strong></label>
        <textarea id="objective" rows="4">Ask for my name, then let me pick a time of day, and greet me.</textarea>
        <label class="run-in"><input id="use-memory" type="checkbox"> Use memory: the agent keeps notes in a Google Sheet of this playground (simulated unless the server has Drive), and remembers earlier conversations</label>
        <label class="run-in">Run the loop
          <select id="run-in">
            <option value="server">on this server</option>
            <option value="page">in this page (simulated model)</option>
          </select>
        </label>
        <button id="run" type="submit">Run</button>
        <button id="stop" type="button" disabled>Stop</button>
      </form>
    </section>
    <section id="suspend" hidden></section>
    <section id="result" hidden></section>
  </div>
  <section>
    <strong>Timeline</strong>
    <ol id="timeline"></ol>
  </section>
</main>
<script type="module" src="/playground/app.js"></script>
</body>
</html>
`;
