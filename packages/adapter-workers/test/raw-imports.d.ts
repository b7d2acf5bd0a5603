// Fixture files imported as text (`import text from '../x.jsonl?raw'`); Vite inlines them for workerd.
declare module '*?raw' {
  const text: string;
  export default text;
}
