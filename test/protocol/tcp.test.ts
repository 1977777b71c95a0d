import { plainTcp } from '@ticketing/test-support';
import { defineProtocolSuite } from './protocol-suite.js';

defineProtocolSuite({ transport: plainTcp, serverArgs: () => [] });
