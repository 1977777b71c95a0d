import { plainTcp } from '../helpers/wire.js';
import { defineProtocolSuite } from './protocol-suite.js';

defineProtocolSuite({ transport: plainTcp, serverArgs: () => [] });
