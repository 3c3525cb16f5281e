import { readdirSync, readFileSync } from 'node:fs';

export interface ProcessEnvironment {
  readonly pid: number;
  readonly env: Readonly<Record<string, string>>;
}

/**
 * The environment each descendant of a process actually runs with, read from Linux's /proc (`environ` is what the
 * process was started with): the witness, from outside, for what a child was given. Linux only, as CI is.
 */
export function descendantEnvironments(ancestor: number): ProcessEnvironment[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readIfAlive(`/proc/${entry}/stat`);
    // `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so read after its last ')'.
    const ppid = stat?.slice(stat.lastIndexOf(')') + 2).split(' ')[1];
    if (ppid) parents.set(Number(entry), Number(ppid));
  }
  const isDescendant = (pid: number): boolean => {
    for (let parent = parents.get(pid); parent !== undefined && parent > 1; parent = parents.get(parent)) {
      if (parent === ancestor) return true;
    }
    return false;
  };
  return [...parents.keys()].filter(isDescendant).flatMap((pid) => {
    const environ = readIfAlive(`/proc/${pid}/environ`);
    if (environ === undefined) return [];
    const env = Object.fromEntries(
      environ
        .split('\0')
        .filter(Boolean)
        .map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
    );
    return [{ pid, env }];
  });
}

/** A process may end between listing /proc and reading it. */
function readIfAlive(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}
