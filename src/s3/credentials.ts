/**
 * Renewing credentials that S3 refused as expired (issue 43).
 *
 * The SDK's credential chain caches temporary credentials (container, IMDS, web identity,
 * SSO) and fetches new ones on its own once they are within its refresh window of their
 * Expiration (5 minutes in the SDK this project pins). That is not enough for a job that
 * outlives them: a request signed just before expiry may arrive after it, a clock behind
 * the issuer's starts the window late, and credentials can be revoked early. S3 then
 * answers 400 ExpiredToken (or TokenRefreshRequired), which used to fail the read.
 *
 * The client now answers such a refusal by renewing once and retrying:
 *  - renew(seen) asks the provider for new credentials (`forceRefresh`, which the SDK's
 *    chain and its memoized providers honour), unless another request already renewed them
 *    after this one was signed (`seen` is the generation the request started with): a burst
 *    of refusals from many parallel GETs costs one fetch, shared.
 *  - A request refused again right after a renewal fails with InvalidCredentialsError: new
 *    credentials that are refused too are not expired but wrong, and retrying would loop.
 * Both the SDK path (listing, HEAD) and the data path (ranged GETs, streams) sign with the
 * same provider, so one renewal serves both.
 */
import { InvalidCredentialsError } from '../errors.js';

/** A credential provider as the SDK's clients hold it: `forceRefresh` bypasses its cache. */
export type RefreshableProvider = (options?: { forceRefresh?: boolean }) => Promise<unknown>;

export class CredentialRenewer {
  /** Counts renewals: a request remembers it when signed, to know whether someone renewed since. */
  private gen = 0;
  private pending: Promise<void> | undefined;

  constructor(private readonly provider: RefreshableProvider) {}

  get generation(): number {
    return this.gen;
  }

  /**
   * New credentials for a request that started at generation `seen` and was refused as
   * expired. Concurrent callers share one fetch; a caller whose credentials were already
   * renewed returns at once. Rejects with InvalidCredentialsError when the fetch fails.
   */
  renew(seen: number): Promise<void> {
    if (seen !== this.gen) return Promise.resolve();
    this.pending ??= this.provider({ forceRefresh: true }).then(
      () => { this.gen++; this.pending = undefined; },
      (err: unknown) => {
        this.pending = undefined;
        throw new InvalidCredentialsError(`S3 refused the credentials as expired and fetching new ones failed (${(err as Error)?.message ?? String(err)})`, { cause: err });
      },
    );
    return this.pending;
  }
}
