export { startDevServer, type DevServer, type DevServerConfig } from './dev-server.js';
export { createReverseProxy, type ReverseProxyOptions } from './reverse-proxy.js';
