/**
 * The generation engine's waiting line: first in, first out, with any member removable in O(1) (a doubly
 * linked list indexed by member), so admitting the head and cancelling a row anywhere in a line of a
 * million rows cost the same as in a line of ten.
 */
interface Link<T> {
  value: T;
  prev: Link<T> | null;
  next: Link<T> | null;
}

export class WaitQueue<T> {
  private head: Link<T> | null = null;
  private tail: Link<T> | null = null;
  private readonly links = new Map<T, Link<T>>();

  /** Members in line. */
  get size(): number {
    return this.links.size;
  }

  /** Adds a member at the back (a member already in line stays where it is). */
  push(value: T): void {
    if (this.links.has(value)) return;
    const link: Link<T> = { value, prev: this.tail, next: null };
    if (this.tail) this.tail.next = link;
    else this.head = link;
    this.tail = link;
    this.links.set(value, link);
  }

  /** The member at the front, left in line. */
  first(): T | undefined {
    return this.head?.value;
  }

  /** Takes a member out wherever it stands; false when it was not in line. */
  delete(value: T): boolean {
    const link = this.links.get(value);
    if (!link) return false;
    this.links.delete(value);
    if (link.prev) link.prev.next = link.next;
    else this.head = link.next;
    if (link.next) link.next.prev = link.prev;
    else this.tail = link.prev;
    return true;
  }

  /** Takes the front member out. */
  shift(): T | undefined {
    const v = this.head?.value;
    if (this.head) this.delete(this.head.value);
    return v;
  }

  /** Empties the line and returns its members in order. */
  drain(): T[] {
    const out: T[] = [];
    for (let l = this.head; l; l = l.next) out.push(l.value);
    this.head = this.tail = null;
    this.links.clear();
    return out;
  }
}
