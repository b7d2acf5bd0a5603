export { startDevServer, type DevServer, type DevServerConfig } from './dev-server.js';
