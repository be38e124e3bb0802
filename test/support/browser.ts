import { createServer, type Server } from 'node:http';
import { expect } from 'chai';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext, type Page as BrowserPage } from 'playwright-core';
import { sharedFixture } from './server.js';

/** Debian's Chromium, headless and quiet: no sandbox (containers), no background network. */
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

/**
 * One Chromium for the whole run (a launch costs seconds), closed by the root hook: each file
 * works in contexts of its own (loopbackContext: a fresh profile, its own cookies and storage) and
 * closes them, never the browser.
 */
export function sharedChromium(): Promise<Browser> {
  return sharedFixture('chromium', () =>
    chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: CHROMIUM_ARGS }),
  );
}

/**
 * The console of the server at `url` in a fresh loopback context of the run's Chromium, signed in
 * with `key`, and the CSP violations its pages report (the caller closes the context).
 */
export async function signedInConsole(
  url: string,
  key: string,
): Promise<{ context: BrowserContext; page: BrowserPage; violations: string[] }> {
  const context = await loopbackContext(await sharedChromium());
  const violations = await recordCspViolations(context);
  const page = await context.newPage();
  await page.goto(`${url}/admin`);
  await page.getByLabel('Admin API key').fill(key);
  await page.keyboard.press('Enter');
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
  return { context, page, violations };
}

/** A fresh browser profile that only talks to loopback (oidc-provider's pages import web fonts). */
export async function loopbackContext(browser: Browser): Promise<BrowserContext> {
  const context = await browser.newContext();
  await context.route(/^https?:\/\/(?!localhost[:/]|127\.0\.0\.1[:/])/, (route) => route.abort());
  return context;
}

/** A client's redirect_uri: a loopback HTTP server that records the query of every request it receives. */
export class RedirectRecorder {
  private constructor(
    private readonly server: Server,
    readonly url: string,
    readonly received: URLSearchParams[],
  ) {}

  static async start(): Promise<RedirectRecorder> {
    const received: URLSearchParams[] = [];
    const server = createServer((request, response) => {
      received.push(new URL(request.url ?? '/', 'http://127.0.0.1').searchParams);
      response.writeHead(200, { 'content-type': 'text/plain' }).end('back at the client');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return new RedirectRecorder(
      server,
      `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`,
      received,
    );
  }

  /** The query of the most recent request. */
  get last(): URLSearchParams | undefined {
    return this.received.at(-1);
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

export interface Page {
  url: URL;
  /** Absent when navigation stopped before requesting `url`. */
  status?: number;
  body?: string;
}

interface Cookie {
  host: string;
  path: string;
  name: string;
  value: string;
}

/**
 * A user agent without a browser: fetch with manual redirects and a cookie jar that keeps
 * what matters here (host-only cookies, paths, deletion). Enough to walk the sign-in's
 * redirects and the dev IdP's plain HTML forms.
 */
export class FetchUserAgent {
  private cookies: Cookie[] = [];
  /** Every URL requested, in order. */
  readonly visited: URL[] = [];

  /**
   * @param headers extra request headers per host (e.g. X-Tenant-Id towards Arbiter, as a tenant's proxy would add).
   */
  constructor(private readonly headers: Record<string, Record<string, string>> = {}) {}

  /** GETs `url` and follows redirects; stops before requesting a URL for which `stopAt` is true. */
  async navigate(url: string | URL, stopAt: (url: URL) => boolean = () => false): Promise<Page> {
    return this.follow(new URL(url), { method: 'GET' }, stopAt);
  }

  /** Submits the page's first form with `fields` added to its hidden inputs, then follows redirects. */
  async submitForm(
    page: Page,
    fields: Record<string, string>,
    stopAt: (url: URL) => boolean = () => false,
  ): Promise<Page> {
    const form = /<form[^>]*action="([^"]+)"[^>]*>([\s\S]*?)<\/form>/.exec(page.body ?? '');
    if (!form) throw new Error(`no form at ${page.url.href}`);
    const hidden = [...form[2]!.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"/g)].map(
      ([, name, value]): [string, string] => [name!, value!],
    );
    const body = new URLSearchParams([...hidden, ...Object.entries(fields)]);
    const action = new URL(decodeEntities(form[1]!), page.url);
    return this.follow(
      action,
      { method: 'POST', body, headers: { 'content-type': 'application/x-www-form-urlencoded' } },
      stopAt,
    );
  }

  /** The href of the first link whose text contains `text`. */
  static link(page: Page, text: string): URL {
    const link = [...(page.body ?? '').matchAll(/<a href="([^"]+)"[^>]*>([^<]*)<\/a>/g)].find(([, , label]) =>
      label!.includes(text),
    );
    if (!link) throw new Error(`no link "${text}" at ${page.url.href}`);
    return new URL(decodeEntities(link[1]!), page.url);
  }

  private async follow(url: URL, init: RequestInit, stopAt: (url: URL) => boolean): Promise<Page> {
    for (let hops = 0; hops < 20; hops += 1) {
      if (stopAt(url)) return { url };
      this.visited.push(url);
      const response = await fetch(url, {
        ...init,
        redirect: 'manual',
        headers: {
          ...(init.headers as Record<string, string>),
          ...this.headers[url.host],
          cookie: this.cookieHeader(url),
        },
      });
      this.remember(url, response.headers.getSetCookie());
      const location = response.headers.get('location');
      if (response.status < 300 || response.status >= 400 || !location)
        return { url, status: response.status, body: await response.text() };
      await response.body?.cancel();
      url = new URL(location, url);
      init = { method: 'GET' };
    }
    throw new Error('too many redirects');
  }

  /** The value of the cookie `name` this agent would send to `url` (undefined: none). */
  cookie(url: string | URL, name: string): string | undefined {
    const at = new URL(url);
    return this.cookies.find(
      (cookie) => cookie.name === name && cookie.host === at.hostname && pathMatches(at.pathname, cookie.path),
    )?.value;
  }

  private cookieHeader(url: URL): string {
    return this.cookies
      .filter((cookie) => cookie.host === url.hostname && pathMatches(url.pathname, cookie.path))
      .map((cookie) => `${cookie.name}=${cookie.value}`)
      .join('; ');
  }

  private remember(url: URL, setCookies: string[]): void {
    for (const header of setCookies) {
      const [pair, ...attributes] = header.split(';').map((part) => part.trim());
      const separator = pair!.indexOf('=');
      const cookie = {
        host: url.hostname,
        path: defaultPath(url),
        name: pair!.slice(0, separator),
        value: pair!.slice(separator + 1),
      };
      let expired = false;
      for (const attribute of attributes) {
        const [key, value = ''] = attribute.split('=');
        if (/^path$/i.test(key!)) cookie.path = value;
        if (/^max-age$/i.test(key!)) expired ||= Number(value) <= 0;
        if (/^expires$/i.test(key!)) expired ||= Date.parse(value) <= Date.now();
      }
      this.cookies = this.cookies.filter(
        (kept) => !(kept.host === cookie.host && kept.path === cookie.path && kept.name === cookie.name),
      );
      if (!expired) this.cookies.push(cookie);
    }
  }
}

function pathMatches(requestPath: string, cookiePath: string): boolean {
  return requestPath === cookiePath || requestPath.startsWith(cookiePath.endsWith('/') ? cookiePath : `${cookiePath}/`);
}

/** RFC 6265 §5.1.4 default-path: the request path up to its last slash. */
function defaultPath(url: URL): string {
  const cut = url.pathname.lastIndexOf('/');
  return cut > 0 ? url.pathname.slice(0, cut) : '/';
}

function decodeEntities(text: string): string {
  return text
    .replace(/&amp;/g, '&')
    .replace(/&#x2F;|&#47;/g, '/')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'");
}

/** Every URL the context's pages request (documents, scripts, fetches), in order. */
export function recordRequests(context: BrowserContext): string[] {
  const urls: string[] = [];
  context.on('request', (request) => urls.push(request.url()));
  return urls;
}

/**
 * Content-Security-Policy violations in any page of the context, as the page itself sees them
 * (its `securitypolicyviolation` events, reported through a binding, which the CSP cannot block)
 * and as Chromium logs them to the console.
 */
export async function recordCspViolations(context: BrowserContext): Promise<string[]> {
  const violations: string[] = [];
  await context.exposeBinding('__reportCspViolation', (_source, text: string) => void violations.push(text));
  await context.addInitScript({
    content:
      "document.addEventListener('securitypolicyviolation', (event) => window.__reportCspViolation(`${event.effectiveDirective} blocked ${event.blockedURI || 'inline'}`));",
  });
  context.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) violations.push(`console: ${message.text()}`);
  });
  return violations;
}

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  targets: string[];
}

/**
 * The axe-core violations of the page as it is now, at the given impacts. axe is injected by
 * evaluating its source (DevTools evaluation is not subject to the page's CSP, a script tag would be).
 */
export async function axeViolations(
  page: import('playwright-core').Page,
  impacts: string[] = ['serious', 'critical'],
): Promise<AxeViolation[]> {
  const { readFile } = await import('node:fs/promises');
  const { createRequire } = await import('node:module');
  const source = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  if (!(await page.evaluate('typeof window.axe === "object"'))) await page.evaluate(source);
  const violations = (await page.evaluate(
    'axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"] } }).then((result) => result.violations.map((violation) => ({ id: violation.id, impact: violation.impact, help: violation.help, targets: violation.nodes.map((node) => String(node.target)) })))',
  )) as AxeViolation[];
  return violations.filter((violation) => impacts.includes(violation.impact ?? ''));
}

/** Opens a page of the signed-in console by its link in the main navigation; resolves once its heading shows. */
export async function openConsolePage(page: BrowserPage, title: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: title, exact: true }).click();
  await page.getByRole('heading', { level: 2, name: title }).waitFor();
}

/** Fails with the list when axe finds a serious or critical violation on the page as it is now. */
export async function expectNoAxeViolations(page: BrowserPage, what: string): Promise<void> {
  const found = await axeViolations(page);
  expect(found, `${what}: ${JSON.stringify(found, null, 2)}`).to.deep.equal([]);
}
